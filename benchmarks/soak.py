"""Chaos soak: many requesters and a stream of buffered deliveries against a connector
that misbehaves at random, then a check of every promise the relay makes.

``trio-relay soak --seconds N`` runs it (``main`` below); ``run_soak`` is the same as a
function. The relay and the in-process reference connector share one ``trio.run`` on
loopback: it is a correctness soak, not a benchmark.

What runs, for ``seconds`` of wall time:

- ``requesters`` tasks, each sending ``send`` actions one after another with a random
  timeout (some with ``wait_connected=True``), a short random pause between them;
- bursts of hundreds of 30 kB requests at once, at random and whenever the connector
  falls silent, so that the writer is blocked mid-batch while requests give up;
- a producer buffering user messages on the connector (``buffer_inbound``), which
  delivers each at once if a session is up and replays every unacknowledged one on each
  handshake; the relay's handler sometimes fails a first attempt on purpose;
- a fault injector that, at random moments, resets the TCP connection, closes with
  1011 or 1001, drops TCP without a close frame (the gateway sees 1006), falls silent
  (no bytes, no pongs) for a while, refuses the next upgrades (4401 before the
  handshake, 1013), delays results, or stops the connector and restarts it.

The relay authenticates with an upgrade secret, so every dial mints a token that the
connector verifies.

Then the faults stop, the backlog of deliveries is drained (forcing a replay if one is
still unacknowledged), the relay is closed, and the invariants are checked:

1. every request returned exactly one outcome, none later than its deadline
   (``DEADLINE_SLACK`` of scheduling slack allowed);
2. no definite failure for a request the connector received, or whose frame was
   written; no success the connector did not answer (and every answer reached the
   request it belongs to); ambiguous only where the frame was handed to the socket;
3. every buffered delivery handled exactly once, and acknowledged;
4. file descriptors and tasks back to their starting level once the relay closed; none
   of the relay's per-connection objects (connections, waiters, transports, client
   WebSockets) still alive; resident memory within ``memory_tolerance`` of where it
   started;
5. nothing logged at ERROR or above, and real progress made (requests succeeded,
   deliveries handled).

How the harness knows what it checks: every action carries a unique ``nonce``. The
connector's outbound handler marks a nonce *received* when the frame arrives and
*answered* when it returns a result (``message_id`` ``m-<nonce>``, checked against the
outcome). The client side's ``WebSocketConnection.send_message`` is wrapped for the run's
duration (client connections only; the connector's sends pass through untouched): a
nonce is *handed to the socket* when a message carrying its frame is passed to it, and
*written* once that call returned. So a definite failure must be neither received nor
written (a frame whose message was still being written when its request gave up may yet
arrive: that is ambiguous), and an ambiguous one must at least have been handed to the
socket. Two bytes of flags per request keep a ten-minute run's bookkeeping small.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import random
import re
import secrets
import socket
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
import trio_websocket

import trio_relay
from trio_relay import MessageEvent, Outcome, RelayConfig, UpgradeAuth
from trio_relay._core.outcome import GATEWAY_CODES
from trio_relay.testing import ReferenceConnector, Session, open_connector
from trio_relay.testing._protocol import JsonObject

__all__ = ["FAULTS", "Invariant", "SoakReport", "main", "run_soak"]

GATEWAY_ID = "soak-gateway"
PLATFORM = "relay"
CHATS = 8

DEADLINE_SLACK = 0.25
"""Seconds a request may end after its deadline before it counts as late: the time the
scheduler takes to run the woken task on a busy, real clock (typically well under 10 ms;
the report prints the worst seen)."""

MEMORY_SLACK = 16 << 20
MEMORY_PER_SESSION = 32 << 10


def memory_tolerance(sessions: int) -> int:
    """Resident-memory growth tolerated between opening and closing the relay, both
    measured after a full garbage collection and ``malloc_trim(0)``.

    The reference connector keeps every ``Session`` it accepted (its records), and those
    pin partly used allocator arenas: ``MEMORY_PER_SESSION`` each, measured at about a
    fifth of that. ``MEMORY_SLACK`` covers the rest of the harness's own records (two
    bytes per request) and fragmentation. A leak of the relay's per-connection objects is
    caught exactly by the object census; this bound catches a leak *per request* of more
    than a few dozen bytes over a long run."""
    return MEMORY_SLACK + MEMORY_PER_SESSION * sessions

WATCHDOG_GRACE = 180.0
"""Seconds past the chaos a run may take (drain, close, checks) before it is declared
wedged and cancelled."""

FAULTS = (
    "reset",
    "close_1011",
    "close_1001",
    "close_1006",
    "silence",
    "refuse_upgrades",
    "delay_results",
    "restart",
)

# Flags per request nonce (two bytes each).
_STARTED = 1
_RECEIVED = 2  # the connector decoded the outbound frame
_ANSWERED = 4  # the connector produced a result for it
_WRITTEN = 8  # the client's send_message for the message carrying it returned
_FINISHED = 16  # request() returned
_DEFINITE = 32  # ... with a gateway-made definite failure
_AMBIGUOUS = 64  # ... with an ambiguous failure
_SUCCESS = 128  # ... with success
_ATTEMPTED = 256  # the client's send_message for a message carrying it was called

_NONCE = re.compile(r'"nonce":(\d+)')

logger = logging.getLogger("trio_relay.soak")


def soak_config() -> RelayConfig:
    """The relay's configuration during the soak: the contract's rules, on a timescale
    where faults are found and recovered from in well under a second."""
    return RelayConfig(
        ping_interval=0.25,
        ping_timeout=1.0,
        handshake_timeout=1.0,
        connect_timeout=1.0,
        backoff_initial=0.02,
        backoff_max=0.25,
        backoff_stable_after=1.0,
        dormant_redial_delay=0.05,
        drain_timeout=1.0,
        close_timeout=0.5,
        max_message_bytes=MESSAGE_BYTES,
        max_line_bytes=MESSAGE_BYTES,
    )


MESSAGE_BYTES = 64 << 10
"""Small enough that bursts span several WebSocket messages on both sides."""

BURST_BYTES = 30_000
"""Content size of each request of a burst (see ``_Soak.burst``)."""


@dataclass(frozen=True)
class Invariant:
    name: str
    ok: bool
    detail: str


@dataclass
class SoakReport:
    """Figures and verdicts of one soak run; ``ok`` is true when every invariant held."""

    seconds: float
    seed: int
    wall_time: float = 0.0
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    """Request outcomes by kind: ``success``, ``declined`` (the connector's refusal),
    ``definite:<code>``, ``ambiguous:<code>``."""
    faults: Counter[str] = field(default_factory=Counter)
    faults_skipped: int = 0
    bursts: int = 0
    deliveries: int = 0
    handled: int = 0
    handler_failures_injected: int = 0
    max_overshoot: float = 0.0
    relay_stats: trio_relay.RelayStats | None = None
    resources: dict[str, tuple[float, float]] = field(default_factory=dict)
    invariants: list[Invariant] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.invariants) and all(inv.ok for inv in self.invariants)

    def render(self) -> str:
        """The figures and the invariant table, as printed by ``trio-relay soak``."""
        out: list[str] = []
        rate = self.requests / self.wall_time if self.wall_time else 0.0
        out.append(
            f"trio-relay soak: {self.seconds:g} s of chaos (seed {self.seed}), "
            f"{self.wall_time:.1f} s wall in all"
        )
        out.append(f"  requests     {self.requests} ({rate:.0f}/s)")
        for kind, count in sorted(self.outcomes.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"    {kind:<34} {count}")
        out.append(
            f"  faults       {sum(self.faults.values())} injected "
            f"({self.faults_skipped} skipped: no session to hit)"
        )
        for kind in FAULTS:
            out.append(f"    {kind:<34} {self.faults[kind]}")
        out.append(f"  bursts       {self.bursts} (100-400 requests of {BURST_BYTES} B at once)")
        out.append(
            f"  deliveries   {self.deliveries} buffered, {self.handled} handled, "
            f"{self.handler_failures_injected} first attempts failed on purpose"
        )
        stats = self.relay_stats
        if stats is not None:
            drops = ", ".join(f"{k} {v}" for k, v in sorted(stats.drops.items()))
            out.append(
                f"  relay        dials {stats.dials}, dial failures {stats.dial_failures}, "
                f"connects {stats.connects}"
            )
            out.append(f"    drops: {drops or 'none'}")
            out.append(
                f"    inbound: delivered {stats.delivered}, replays dropped "
                f"{stats.replays_dropped}, handler failures {stats.handler_failures}, "
                f"acks sent {stats.acks_sent}, dead letters {stats.dead_letters}"
            )
            out.append(
                f"    frames: sent {stats.frames_sent} in {stats.messages_sent} messages, "
                f"received {stats.frames_received}, rejected {stats.frames_rejected}"
            )
        for name, (before, after) in self.resources.items():
            out.append(f"  {name:<12} {before:g} -> {after:g}")
        out.append(f"  worst lateness past a deadline: {self.max_overshoot * 1000:.1f} ms")
        out.append("")
        width = max((len(inv.name) for inv in self.invariants), default=10)
        out.append(f"  {'invariant':<{width}}  result  detail")
        out.append(f"  {'-' * width}  ------  ------")
        for inv in self.invariants:
            out.append(f"  {inv.name:<{width}}  {'ok' if inv.ok else 'FAILED':<6}  {inv.detail}")
        out.append("")
        out.append("soak: PASSED" if self.ok else "soak: FAILED")
        return "\n".join(out)


class _Flags:
    """Two bytes of flags per nonce, grown in chunks."""

    def __init__(self) -> None:
        self.data = array.array("H", bytes(1 << 17))
        self.count = 0

    def new(self) -> int:
        nonce = self.count
        self.count += 1
        if nonce >= len(self.data):
            self.data.extend(array.array("H", bytes(2 * len(self.data))))
        self.data[nonce] = _STARTED
        return nonce

    def set(self, nonce: int, flag: int) -> None:
        if 0 <= nonce < self.count:
            self.data[nonce] |= flag

    def has(self, nonce: int, flag: int) -> bool:
        return bool(self.data[nonce] & flag)


class _ErrorLog(logging.Handler):
    """Counts records at ERROR and above (and keeps the first few)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.count = 0
        self.first: list[str] = []
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.first) < 5:
            text = f"{record.name}: {record.getMessage()}"
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({record.exc_info[1]!r})"
            self.first.append(text[:300])
            self.tracebacks.append(logging.Formatter().format(record))


@contextlib.contextmanager
def _tap_client_writes(on_send: Callable[[str | bytes, int], None]) -> Iterator[None]:
    """Call ``on_send(message, _ATTEMPTED)`` when a *client-side* ``send_message`` is
    called, and ``on_send(message, _WRITTEN)`` once it returned."""
    cls = trio_websocket.WebSocketConnection
    original = cls.send_message

    async def send_message(self: Any, message: str | bytes) -> None:
        if self.is_client:
            on_send(message, _ATTEMPTED)
        await original(self, message)
        if self.is_client:
            on_send(message, _WRITTEN)

    cls.send_message = send_message  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.send_message = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _errors_visible() -> Iterator[None]:
    """Make sure the relay's and the connector's ERROR records are created for the run
    (a caller may have silenced them, e.g. ``trio-relay bench``), so that the "nothing
    logged at ERROR" verdict is never blind. Levels are restored afterwards."""
    saved = []
    for name in ("trio_relay", "trio_relay.testing.connector"):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        if logger.getEffectiveLevel() > logging.ERROR:
            logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _trim() -> None:
    """Collect garbage and hand freed heap back to the OS (glibc's ``malloc_trim``), so
    that resident size measures live memory, not what the allocator keeps for reuse
    after a burst."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def _rss_bytes() -> int:
    _trim()
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def _live_tasks() -> int:
    root = trio.lowlevel.current_root_task()
    assert root is not None
    count, stack = 0, [root]
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


def _relay_objects() -> Counter[str]:
    """Live objects of the relay's per-connection types: what a leak would multiply.

    The ``Relay`` handle itself is left out on purpose: its caller may keep it (and so
    may a log handler holding a handler failure's traceback, as pytest's does)."""
    from trio_relay._trio.connection import Connection, Waiter
    from trio_relay._trio.liveness import LivenessStream

    kinds: tuple[type, ...] = (Connection, Waiter, LivenessStream)
    gc.collect()
    found: Counter[str] = Counter()
    for obj in gc.get_objects():
        # type(), never isinstance(): isinstance reads obj.__class__, and a lazy proxy
        # (openai's module-level resources) builds what it stands for when asked, which
        # cost the soak 50 MiB of RSS whenever openai had been imported.
        kind = type(obj)
        if issubclass(kind, kinds):
            found[kind.__name__] += 1
        elif issubclass(kind, trio_websocket.WebSocketConnection) and obj.is_client:
            found["client WebSocketConnection"] += 1
    return found


class _Soak:
    def __init__(
        self,
        seconds: float,
        seed: int,
        *,
        requesters: int,
        delivery_rate: float,
        fault_interval: float,
        timeouts: tuple[float, float],
        progress: Callable[[str], None] | None,
        watchdog_grace: float,
    ) -> None:
        self.seconds = seconds
        self.watchdog_grace = watchdog_grace
        self.rng = random.Random(seed)
        self.requesters = requesters
        self.delivery_rate = delivery_rate
        self.fault_interval = fault_interval
        self.timeouts = timeouts
        self.progress = progress
        self.report = SoakReport(seconds=seconds, seed=seed)
        self.flags = _Flags()
        self.late = 0
        self.doubles = 0
        self.mismatched = 0
        self.handled = bytearray()
        self.attempts = bytearray()
        self.stop_requests = False
        self.requests: trio.Nursery | None = None
        self.secret = secrets.token_hex(16)
        self.errors = _ErrorLog()

    # --- the connector's side ---------------------------------------------------------

    async def answer(self, session: Session, frame: Any) -> JsonObject | None:
        nonce = frame.action.get("nonce")
        if not isinstance(nonce, int):
            return {"success": False, "error": "soak: no nonce"}
        self.flags.set(nonce, _RECEIVED)
        roll = self.rng.random()
        if roll < 0.05:
            await trio.sleep(self.rng.uniform(0.0, 0.4))  # a slow platform call
        self.flags.set(nonce, _ANSWERED)
        if roll > 0.98:
            return {"success": False, "code": "egress_declined", "nonce": nonce}
        return {"success": True, "message_id": f"m-{nonce}"}

    def sent(self, message: str | bytes, flag: int) -> None:
        text = message if isinstance(message, str) else message.decode("utf-8", "replace")
        if '"outbound"' in text:
            for match in _NONCE.finditer(text):
                self.flags.set(int(match.group(1)), flag)

    # --- the gateway's side -----------------------------------------------------------

    async def on_message(self, event: MessageEvent) -> None:
        index = int(str(event.message_id).removeprefix("d-"))
        self.attempts[index] = min(self.attempts[index] + 1, 255)
        await trio.sleep(self.rng.uniform(0.0, 0.01))
        if self.attempts[index] == 1 and self.rng.random() < 0.03:
            self.report.handler_failures_injected += 1
            raise RuntimeError(f"soak: first attempt of d-{index} fails on purpose")
        self.handled[index] = min(self.handled[index] + 1, 255)

    def record(self, nonce: int, outcome: Outcome, elapsed: float, timeout: float) -> None:
        flags = self.flags
        if flags.has(nonce, _FINISHED):
            self.doubles += 1
        flags.set(nonce, _FINISHED)
        overshoot = elapsed - timeout
        if overshoot > self.report.max_overshoot:
            self.report.max_overshoot = overshoot
        if overshoot > DEADLINE_SLACK:
            self.late += 1
        if outcome.success:
            flags.set(nonce, _SUCCESS)
            kind = "success"
            if outcome.result.get("message_id") != f"m-{nonce}":
                self.mismatched += 1
        elif outcome.code in GATEWAY_CODES:
            if outcome.ambiguous:
                flags.set(nonce, _AMBIGUOUS)
                kind = f"ambiguous:{outcome.code}"
            else:
                flags.set(nonce, _DEFINITE)
                kind = f"definite:{outcome.code}"
        else:
            kind = "declined" if outcome.code == "egress_declined" else f"other:{outcome.code}"
            if outcome.result.get("nonce") != nonce:
                self.mismatched += 1
        self.report.outcomes[kind] += 1

    async def one_request(
        self, relay: trio_relay.Relay, rng: random.Random, size: int, wait: bool
    ) -> None:
        nonce = self.flags.new()
        action = {"op": "send", "chat_id": f"c{nonce % CHATS}", "content": "x" * size,
                  "nonce": nonce}
        timeout = rng.uniform(*self.timeouts)
        start = trio.current_time()
        outcome = await relay.request(action, timeout=timeout, wait_connected=wait)
        self.record(nonce, outcome, trio.current_time() - start, timeout)

    async def requester(self, relay: trio_relay.Relay, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop_requests:
            size = rng.choice((8, 8, 8, 200, 2_000, 20_000))
            await self.one_request(relay, rng, size, rng.random() < 0.15)
            await trio.sleep(rng.uniform(0.0, 0.02))

    async def burster(self, relay: trio_relay.Relay, until: float) -> None:
        while True:
            await trio.sleep(self.rng.uniform(1.0, 6.0))
            if trio.current_time() >= until:
                return
            self._spawn_burst(relay)

    def _spawn_burst(self, relay: trio_relay.Relay) -> None:
        assert self.requests is not None
        self.requests.start_soon(self.burst, relay)

    async def burst(self, relay: trio_relay.Relay) -> None:
        """Hundreds of large requests at once: megabytes queued for the writer, more
        than the kernel buffers hold while the connector is silent, so the writer is
        blocked mid-batch while requests time out and connections die."""
        if self.stop_requests:
            return
        self.report.bursts += 1
        rng = random.Random(self.rng.getrandbits(32))
        async with trio.open_nursery() as nursery:
            for _ in range(rng.randint(100, 400)):
                nursery.start_soon(self.one_request, relay, rng, BURST_BYTES, False)

    async def producer(self, connector: ReferenceConnector, until: float) -> None:
        while trio.current_time() < until:
            index = len(self.handled)
            self.handled.append(0)
            self.attempts.append(0)
            event = {
                "text": f"soak message {index}",
                "message_type": "text",
                "message_id": f"d-{index}",
                "source": {
                    "platform": PLATFORM,
                    "chat_id": f"c{index % CHATS}",
                    "user_id": "u1",
                },
            }
            connector.buffer_inbound(event, gateway_id=GATEWAY_ID)
            self.report.deliveries += 1
            await trio.sleep(self.rng.uniform(0.0, 2.0 / self.delivery_rate))

    # --- faults -----------------------------------------------------------------------

    async def injector(
        self,
        connector: ReferenceConnector,
        relay: trio_relay.Relay,
        nursery: trio.Nursery,
        until: float,
    ) -> None:
        while True:
            await trio.sleep(self.rng.uniform(0.1, 2 * self.fault_interval))
            if trio.current_time() >= until:
                return
            kind = self.rng.choice(FAULTS)
            if await self.inject(kind, connector, relay, nursery):
                self.report.faults[kind] += 1
            else:
                self.report.faults_skipped += 1

    async def inject(
        self,
        kind: str,
        connector: ReferenceConnector,
        relay: trio_relay.Relay,
        nursery: trio.Nursery,
    ) -> bool:
        rng = self.rng
        if kind == "delay_results":
            connector.delay_results(rng.uniform(0.05, 1.5))
            nursery.start_soon(self._undelay, connector, rng.uniform(0.5, 3.0))
            return True
        if kind == "restart":
            if not connector.listening:
                return False
            await connector.stop(abort=rng.random() < 0.5)
            await trio.sleep(rng.uniform(0.05, 1.5))
            await connector.start()
            return True
        session = connector.current
        if session is None:
            return False
        if kind == "reset":
            await connector.abort(session)
        elif kind == "close_1011":
            await connector.close(1011, "keepalive ping timeout", session)
        elif kind == "close_1001":
            await connector.close(1001, "going away", session)
        elif kind == "close_1006":
            # TCP FIN without a close frame: the gateway's side reads 1006.
            with contextlib.suppress(OSError):
                session.stream.socket.shutdown(socket.SHUT_RDWR)
            with trio.move_on_after(3):
                await session.closed.wait()
        elif kind == "silence":
            connector.go_silent(session)
            # Shorter than the relay's ping timeout about half the time: a stall it
            # rides out, with a backlog queued behind it; else a dead peer it detects.
            nursery.start_soon(self._resume, session, rng.uniform(0.2, 2.0))
            self._spawn_burst(relay)
        elif kind == "refuse_upgrades":
            code, reason = rng.choice(
                ((4401, "unauthorized"), (4401, "expired"), (1013, "try again later"))
            )
            connector.refuse_upgrades(rng.randint(1, 3), code, reason)
            await connector.close(1012, "service restart", session)
        else:  # pragma: no cover - FAULTS and this dispatch are kept in step
            raise AssertionError(kind)
        return True

    @staticmethod
    async def _undelay(connector: ReferenceConnector, after: float) -> None:
        await trio.sleep(after)
        connector.delay_results(0)

    @staticmethod
    async def _resume(session: Session, after: float) -> None:
        await trio.sleep(after)
        session.resume()

    # --- the run ----------------------------------------------------------------------

    async def run_guarded(self) -> None:
        with trio.move_on_after(self.seconds + self.watchdog_grace) as watchdog:
            await self.run()
        if watchdog.cancelled_caught:  # pragma: no cover - only if something wedged
            self.report.invariants.append(
                Invariant("the soak finished", False, "wedged: cancelled by the watchdog")
            )

    async def run(self) -> None:
        report = self.report
        started = trio.current_time()
        async with open_connector(
            secrets={GATEWAY_ID: self.secret},
            outbound_handler=self.answer,
            max_message_bytes=MESSAGE_BYTES,
            record=False,
        ) as connector:
            fds0, tasks0, rss0 = _open_fds(), _live_tasks(), _rss_bytes()
            objects0 = _relay_objects()
            until = trio.current_time() + self.seconds
            stats = await self._run_relay(connector, until)
            report.relay_stats = stats
            await self._wait_sessions_over(connector)
            fds1, tasks1 = await self._settled(fds0, tasks0)
            objects1 = _relay_objects()
            rss1 = _rss_bytes()
            pending = connector.pending(GATEWAY_ID)
        report.wall_time = trio.current_time() - started
        report.resources = {
            "fds": (fds0, fds1),
            "tasks": (tasks0, tasks1),
            "rss MiB": (round(rss0 / 2**20, 1), round(rss1 / 2**20, 1)),
        }
        tolerance = memory_tolerance(len(connector.sessions))
        self._check(
            pending, objects0, objects1, (rss1 - rss0, tolerance), (fds0, fds1), (tasks0, tasks1)
        )

    async def _run_relay(
        self, connector: ReferenceConnector, until: float
    ) -> trio_relay.RelayStats:
        async with trio_relay.open_relay(
            connector.url,
            auth=UpgradeAuth(GATEWAY_ID, self.secret),
            on_message=self.on_message,
            config=soak_config(),
        ) as relay:
            # Requests (bursts included) live in their own nursery, so that stopping the
            # chaos never cancels one: each must end by its own deadline.
            async with trio.open_nursery() as requests:
                self.requests = requests
                async with trio.open_nursery() as chaos:
                    chaos.start_soon(self.injector, connector, relay, chaos, until)
                    chaos.start_soon(self.burster, relay, until)
                    chaos.start_soon(self.producer, connector, until)
                    chaos.start_soon(self._report_progress, relay, until)
                    for _ in range(self.requesters):
                        requests.start_soon(self.requester, relay, self.rng.getrandbits(32))
                    await trio.sleep_until(until)
                    self.stop_requests = True
                    chaos.cancel_scope.cancel()
                # Give them their deadline and more, then cancel: a request still
                # running then is reported as never returned, not waited on forever.
                requests.cancel_scope.deadline = trio.current_time() + self.timeouts[1] + 5
            await self._repair(connector)
            await self._drain_deliveries(relay, connector)
            stats = relay.stats
        return stats

    async def _report_progress(self, relay: trio_relay.Relay, until: float) -> None:
        if self.progress is None:
            return
        while trio.current_time() < until:
            await trio.sleep(min(30.0, max(until - trio.current_time(), 0.0)))
            self.progress(
                f"[soak] {self.flags.count} requests, {sum(self.report.faults.values())} "
                f"faults, {self.report.deliveries} deliveries, state {relay.state.value}"
            )

    async def _repair(self, connector: ReferenceConnector) -> None:
        """Undo every lasting fault: the backlog must be able to drain."""
        connector.delay_results(0)
        for session in connector.sessions:
            session.resume()
        if not connector.listening:
            await connector.start()

    async def _drain_deliveries(
        self, relay: trio_relay.Relay, connector: ReferenceConnector
    ) -> None:
        """Wait until every buffered delivery is acked; a delivery whose handler failed
        comes back only on a replay, so force one (a 1012 close) when the backlog
        stalls. Bounded: what is left over shows up in the invariants."""
        with trio.move_on_after(60):
            while connector.pending(GATEWAY_ID):
                with trio.move_on_after(5):
                    await relay.wait_connected()
                with trio.move_on_after(1.0):
                    await connector.wait_until(lambda: not connector.pending(GATEWAY_ID))
                if connector.pending(GATEWAY_ID) and connector.current is not None:
                    await connector.close(1012, "soak: replay the backlog")

    async def _wait_sessions_over(self, connector: ReferenceConnector) -> None:
        with trio.move_on_after(5):
            await connector.wait_until(lambda: connector.current is None)

    async def _settled(self, fds0: int, tasks0: int) -> tuple[int, int]:
        """Resources once back at their starting level, or after a grace period."""
        with trio.move_on_after(5):
            while (_open_fds(), _live_tasks()) != (fds0, tasks0):
                await trio.sleep(0.05)
        return _open_fds(), _live_tasks()

    # --- verdicts ---------------------------------------------------------------------

    def _check(
        self,
        pending: Sequence[str],
        objects0: Counter[str],
        objects1: Counter[str],
        rss: tuple[int, int],
        fds: tuple[int, int],
        tasks: tuple[int, int],
    ) -> None:
        report = self.report
        flags = self.flags
        report.requests = flags.count
        report.handled = sum(1 for n in self.handled if n)
        data = memoryview(flags.data)[: flags.count]
        no_outcome = definite_received = definite_written = 0
        success_unanswered = ambiguous_unwritten = 0
        for value in data:
            if not value & _FINISHED:
                no_outcome += 1
            if value & _DEFINITE:
                if value & _RECEIVED:
                    definite_received += 1
                if value & _WRITTEN:
                    definite_written += 1
            if value & _SUCCESS and not value & _ANSWERED:
                success_unanswered += 1
            if value & _AMBIGUOUS and not value & _ATTEMPTED:
                ambiguous_unwritten += 1
        data.release()
        inv = report.invariants

        def add(name: str, ok: bool, detail: str) -> None:
            inv.append(Invariant(name, ok, detail))

        finished = flags.count - no_outcome
        add(
            "every request got exactly one outcome",
            no_outcome == 0 and self.doubles == 0,
            f"{finished} of {flags.count} returned; {no_outcome} never returned, "
            f"{self.doubles} twice",
        )
        add(
            "no outcome later than its deadline",
            self.late == 0,
            f"{self.late} later than {DEADLINE_SLACK * 1000:.0f} ms past it; worst "
            f"{report.max_overshoot * 1000:+.1f} ms",
        )
        definite = sum(v for k, v in report.outcomes.items() if k.startswith("definite:"))
        add(
            "no definite failure the connector received",
            definite_received == 0 and definite_written == 0,
            f"{definite} definite failures: {definite_received} received by the "
            f"connector, {definite_written} written",
        )
        successes = report.outcomes["success"]
        add(
            "no success the connector did not answer",
            success_unanswered == 0 and self.mismatched == 0,
            f"{successes} successes: {success_unanswered} unanswered, "
            f"{self.mismatched} answers matched to the wrong request",
        )
        ambiguous = sum(v for k, v in report.outcomes.items() if k.startswith("ambiguous:"))
        add(
            "ambiguous only where the frame was written",
            ambiguous_unwritten == 0,
            f"{ambiguous} ambiguous: {ambiguous_unwritten} never handed to the socket",
        )
        twice = sum(1 for n in self.handled if n > 1)
        never = sum(1 for n in self.handled if n == 0)
        dead = report.relay_stats.dead_letters if report.relay_stats else 0
        add(
            "every buffered delivery handled exactly once",
            twice == 0 and never == 0 and dead == 0,
            f"{report.deliveries} buffered: {never} never handled, {twice} more than "
            f"once, {dead} dead-lettered",
        )
        add(
            "every buffered delivery acknowledged",
            not pending,
            f"{len(pending)} still unacknowledged at the connector",
        )
        add(
            "file descriptors back to the start",
            fds[1] <= fds[0],
            f"{fds[0]} -> {fds[1]}",
        )
        add("tasks back to the start", tasks[1] <= tasks[0], f"{tasks[0]} -> {tasks[1]}")
        leaked = objects1 - objects0
        add(
            "memory: no connection object outlives the relay",
            not leaked,
            ", ".join(f"{k} {v}" for k, v in sorted(leaked.items())) or "none alive",
        )
        add(
            "memory: resident size back near the start",
            rss[0] <= rss[1],
            f"{rss[0] / 2**20:+.1f} MiB (tolerance {rss[1] / 2**20:.0f} MiB)",
        )
        first = f": {self.errors.first}" if self.errors.first else ""
        errors = self.errors.count
        add("nothing logged at ERROR", errors == 0, f"{errors} records{first}")
        progressed = successes > 0 and report.handled > 0
        add(
            "progress made",
            progressed,
            f"{successes} successes, {report.handled} deliveries handled",
        )


def run_soak(
    seconds: float,
    *,
    seed: int | None = None,
    requesters: int = 16,
    delivery_rate: float = 30.0,
    fault_interval: float = 0.75,
    timeouts: tuple[float, float] = (0.25, 2.0),
    progress: Callable[[str], None] | None = None,
    watchdog_grace: float = WATCHDOG_GRACE,
) -> SoakReport:
    """Run the chaos soak for ``seconds`` of injected faults (plus a few seconds to drain
    and close) and return its report; ``report.ok`` says whether every invariant held.

    ``seed`` makes the choices of the harness repeatable (the network's timing is not);
    ``None`` picks one, printed in the report. ``fault_interval`` is the mean gap between
    faults; request timeouts are drawn uniformly from ``timeouts``. A run still going
    ``watchdog_grace`` seconds after the chaos ended is cancelled and reported wedged.
    Must not be called from inside a Trio run.
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    soak = _Soak(
        seconds,
        seed,
        requesters=requesters,
        delivery_rate=delivery_rate,
        fault_interval=fault_interval,
        timeouts=timeouts,
        progress=progress,
        watchdog_grace=watchdog_grace,
    )
    root = logging.getLogger()
    root.addHandler(soak.errors)
    try:
        with _errors_visible(), _tap_client_writes(soak.sent):
            trio.run(soak.run_guarded)
    finally:
        root.removeHandler(soak.errors)
    return soak.report


def main(argv: Sequence[str] | None = None) -> int:
    """``trio-relay soak``: run the soak, print the table; 0 if every invariant held."""
    parser = argparse.ArgumentParser(
        prog="trio-relay soak",
        description="Chaos soak of trio_relay against the in-process reference connector.",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="chaos duration (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="harness seed (default random)")
    parser.add_argument("--requesters", type=int, default=16, help="concurrent requesters")
    parser.add_argument(
        "--delivery-rate", type=float, default=30.0, help="buffered deliveries per second"
    )
    parser.add_argument(
        "--fault-interval", type=float, default=0.75, help="mean seconds between faults"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--log-level", default="CRITICAL", help="log level for the library's logs on stderr"
    )
    args = parser.parse_args(argv)
    level = logging.getLevelName(str(args.log_level).upper())
    if not isinstance(level, int):
        parser.error(f"unknown log level {args.log_level!r}")
    # A handler of our own at the chosen level; the loggers' levels are left alone
    # (the soak needs the relay's ERROR records whatever is printed).
    handler = logging.StreamHandler()
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, old_level))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        report = run_soak(
            args.seconds,
            seed=args.seed,
            requesters=args.requesters,
            delivery_rate=args.delivery_rate,
            fault_interval=args.fault_interval,
            progress=None if args.quiet else progress,
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
