"""Live counters of one relay. Plain numbers and strings only: never a token or secret."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)  # no __dict__: one RelayStats per relay, fields fixed
class RelayStats:
    """Counters since the relay was opened; read them any time (they are live).

    ``drops`` counts ended connections by cause (``"closed by peer"``,
    ``"keepalive timeout"``, ...); ``requests`` counts finished requests by outcome
    (``"success"``, ``"failed"`` for a connector's refusal, or the gateway's own codes
    such as ``"timeout"`` and ``"connection_lost"``): a request is counted as it is
    settled, before its caller runs again, and a cancelled caller's request is not
    counted.
    """

    dials: int = 0
    dial_failures: int = 0
    last_dial_failure: str | None = None
    """Why the last failed dial failed, in plain words (never a token)."""
    connects: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    last_close_code: int | None = None
    last_close_reason: str | None = None
    last_end_cause: str | None = None
    """How the last link or dial ended, in words (``"closed by peer"``, ...)."""
    ping_rtt: float | None = None
    effective_ping_interval: float | None = None
    """The ping interval in use (seconds): ``config.ping_interval``, or lower once an idle
    cut was learned (``RelayConfig.adapt_ping_interval``)."""
    idle_cut_detected: float | None = None
    """The silence (seconds) after which something between us and the connector cuts
    idle links, once two links in a row showed it; ``None`` while none was seen."""
    requests: Counter[str] = field(default_factory=Counter)
    frames_received: int = 0
    frames_rejected: int = 0
    messages_sent: int = 0
    frames_sent: int = 0
    connection_tasks: int = 0
    """Tasks the current connection runs now: 2 when idle (the reader, and the timer,
    which runs in the task serving the connection), 3 while the writer takes a burst."""
    tasks: int = 0
    """Trio tasks the relay runs now. 2 for an idle, connected relay: the supervisor
    (which serves the connection and runs its timer) and the reader; plus the writer
    during a burst, the inbound pipeline once a frame has come, and one per chat with
    deliveries in hand. The memory benchmark reports it beside the bytes per relay."""
    tasks_failed: int = 0
    """Relay tasks that ended by an exception (a bug, or a dedupe store that could not
    open): [`Relay.health`][trio_relay.Relay.health] is then not live."""
    redial_holds: int = 0
    """Redial holds placed ([`Relay.hold_redial`][trio_relay.Relay.hold_redial],
    ``go_dormant(hold=...)``)."""
    declines_latched: int = 0
    """Chats latched after the connector declined egress to them (one WARNING each; see
    ``RelayConfig.latch_declines``). [`Relay.health`][trio_relay.Relay.health] names the
    chats latched now."""
    requests_latched: int = 0
    """Content requests answered at once, with no frame sent, because their chat was
    latched (counted in ``requests`` too, as ``"failed"``)."""
    missing_descriptors: list[str] = field(default_factory=list)
    """Hello'd platforms still without a descriptor ``handshake_timeout`` after the
    current connection opened (requests for them get the legacy ops only)."""
    # inbound pipeline
    delivered: int = 0
    trust_fields_rejected: int = 0
    """Trust fields on an inbound ``source`` (``is_bot``, ``message_is_edit``,
    ``one_to_one_verified``) that were present but not a JSON boolean: read as ``None``
    (unknown, so a control that depends on one fails closed), logged at WARNING."""
    replays_dropped: int = 0
    handler_failures: int = 0
    turns_interrupted: int = 0
    """Message handlers cancelled because the user asked to stop their turn
    (``interrupt_inbound``, ``RelayConfig.interrupt_cancels_turn``); each is also counted
    in ``delivered``: the stop was the user's, so the delivery is handled and acked."""
    dead_letters: int = 0
    acks_sent: int = 0
    inbound_dropped: int = 0
    queue_depth: int = 0
    # dedupe store (RelayConfig.dedupe_store)
    dedupe_store_outages: int = 0
    """Times the dedupe store became unreachable or too slow (one per outage)."""
    dedupe_store_fail_open: int = 0
    """Deliveries run without the store's answer during an outage (a repeat beats a loss)."""


class counted_task:
    """Count the task that runs this block in ``stats.tasks``. (Lower case: it is used
    like a function, ``with counted_task(stats):``.)

    A class, not a ``@contextmanager``: each long-lived task holds its block's manager
    for its whole life, and a generator-based one (generator, frame and wrapper) costs
    about 600 bytes per task where this costs 48.
    """

    __slots__ = ("_stats",)

    def __init__(self, stats: RelayStats) -> None:
        self._stats = stats

    def __enter__(self) -> None:
        self._stats.tasks += 1

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        self._stats.tasks -= 1
        # Cancellation (and KeyboardInterrupt) is not an Exception: only a real failure
        # of the task counts.
        if exc_type is not None and issubclass(exc_type, Exception):
            self._stats.tasks_failed += 1
