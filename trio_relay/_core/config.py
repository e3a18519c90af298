"""Everything a relay can be told: identities, upgrade credentials, timings and limits.

Defaults follow the reference timings of docs/protocol.md ("Timings") except where this
library's design deliberately improves on them (each such default says why). Sans-I/O: no Trio.
"""

from __future__ import annotations

import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any

from .dedupe_store import DedupeStore
from .endpoint import ByteStream, Endpoint
from .keepalive import KeepaliveConfig
from .telemetry import TelemetryProvider
from .token import DEFAULT_TOKEN_TTL, check_gateway_id
from .url import masked_credentials

Dialer = Callable[[Endpoint], Awaitable[ByteStream]]
"""``async (endpoint) -> stream``: open a byte stream to ``endpoint``.

A dialer is built with what it needs (a proxy, a TLS context, socket options); the
default one is built from the config when the relay opens. The stream it returns has
the relay's one stream interface (``ByteStream``: ``receive_some``, ``send_all``,
``send_nowait``, ``close``, ``aclose``), so a test's stream takes the same direct-write
path as a real socket. Raise ``OSError`` (refused, unreachable, TLS failures as
``ssl.SSLError``) or any ``trio`` stream error for a failed dial; the relay classifies
it, logs it in plain words and redials. The relay bounds the call with
``config.connect_timeout`` and closes the stream when the connection ends."""


@dataclass(frozen=True)
class Identity:
    """One bot identity this gateway fronts; one ``hello`` is sent per identity."""

    platform: str
    bot_id: str = ""
    command_manifest: list[Any] | None = None


@dataclass(frozen=True)
class UpgradeAuth:
    """Gateway id and shared secret for the upgrade's bearer token.

    The secret never appears in ``repr`` (so not in logs or tracebacks either).
    """

    gateway_id: str
    secret: str = field(repr=False)
    token_ttl: float = DEFAULT_TOKEN_TTL

    def __post_init__(self) -> None:
        check_gateway_id(self.gateway_id)
        if not self.secret:
            raise ValueError("UpgradeAuth.secret must be non-empty")
        if self.token_ttl < 0:
            raise ValueError("UpgradeAuth.token_ttl must be >= 0 seconds (0 = never expires)")


DEFAULT_KEEPALIVE = KeepaliveConfig()


# Slotted: a dict-backed instance of these ~40 fields is ~1.7 KB, and a process may
# hold one per relay (hundreds of idle relays each given its own config).
@dataclass(frozen=True, slots=True)
class RelayConfig:
    """Timings (seconds) and limits of one relay.

    - ``ping_interval``/``ping_timeout``: a WebSocket ping goes out every
      ``ping_interval``; the link is declared dead only when *nothing at all* has been
      received for ``ping_timeout``. Any byte is proof of life, so a busy peer is never
      dropped for a late pong. Defaults 10 s / 40 s find a dead peer within 40 s, where
      the replaced design (30 s / 60 s, pong-only) took about 90 s.
    - ``backoff_*``: see `trio_relay._core.backoff.Backoff`. A link that served
      ``backoff_stable_after`` seconds after its handshake is redialled after
      ``backoff_first_delay`` (0: at once) when it drops, and refused dials after it
      retry within about 50 to 400 ms; everything else waits uniform in [d/2, d], ``d``
      doubling from ``backoff_initial`` to ``backoff_max``.
    - ``dormant_redial_delay``: the first redial after
      [`Relay.go_dormant`][trio_relay.Relay.go_dormant].
    - ``redial_hold_max``: the cap on a redial hold
      ([`Relay.hold_redial`][trio_relay.Relay.hold_redial]).
    - ``drain_timeout``: how long leaving ``open_relay`` waits for in-flight requests.
    - ``close_timeout``: how long the WebSocket closing handshake may take.
    - ``dedupe_size``: the least number of handled keys remembered (the pipeline keeps
      at least ``max_inbound_queue + max_concurrent_handlers``, and every key whose
      ack has not been written to a socket yet).
    - ``dedupe_path``: shortcut for ``dedupe_store=SqliteDedupeStore(dedupe_path)``.
    """

    ping_interval: float = 10.0
    """A WebSocket ping goes out this often (seconds)."""
    ping_timeout: float = 40.0
    """The link is declared dead only when *nothing at all* was received for this long, so
    a busy peer is never dropped for a late pong. The replaced design used 30 s / 60 s
    pong-only and took about 90 s to find a dead link."""
    request_timeout: float = 30.0
    """The default deadline of one request (seconds); `request(..., timeout=)` sets one per
    call."""
    handshake_timeout: float = 30.0
    """How long the WebSocket upgrade (HTTP request, response, TLS inside) may take."""
    connect_timeout: float = 10.0
    """How long opening the TCP connection (happy eyeballs, the proxy tunnel) may take."""
    backoff_initial: float = 1.0
    """The first step of the redial ladder: each wait is uniform in [d/2, d], d doubling
    from this value to `backoff_max`."""
    backoff_max: float = 30.0
    """The top of the redial ladder; a `Retry-After` from the connector is honoured up to
    this value."""
    backoff_first_delay: float = 0.0
    """The first redial after a healthy link: **at once**."""
    backoff_stable_after: float = 5.0
    """A link that served this long after its handshake was healthy: when it drops the
    ladder starts afresh and the first redial waits only ``backoff_first_delay``.
    Younger links are flapping and climb the ladder. (Replaces ``backoff_reset_after``,
    60 s, which also counted links that never completed a handshake.)"""
    dormant_redial_delay: float = 1.0
    """The first redial after `go_dormant()` (seconds)."""
    redial_hold_max: float = 60.0
    """The longest a redial hold (`hold_redial()`, `go_dormant(hold=...)`) lasts, in
    seconds, whatever it asked for: a lost release must not strand the relay. The relay
    dials at once when a hold ends."""
    drain_timeout: float = 5.0
    """How long leaving `open_relay` waits for in-flight requests."""
    close_timeout: float = 1.0
    """How long the WebSocket closing handshake may take."""
    max_message_bytes: int = 1 << 20
    """The largest WebSocket message, outgoing batches and incoming messages alike; a
    larger incoming message closes the connection with 1009 and the relay redials."""
    max_line_bytes: int = 1 << 20
    """The largest incoming NDJSON line; a longer one is skipped and counted in
    `stats.frames_rejected`."""
    max_queued_frames: int = 10_000
    """How many outgoing frames may wait for the socket; a request beyond that ends at once
    with `queue_full`."""
    max_concurrent_handlers: int = 16
    """How many `on_message` handlers run at once in the inbound pipeline."""
    max_inbound_queue: int = 1_000
    """How many deliveries wait for a handler in the inbound pipeline before the reader
    stops reading."""
    max_delivery_attempts: int = 5
    """Runs of one delivery's handler (retried in the session after 0.5 s, 1 s, 2 s, …, at
    most 10 s apart) before it is dead-lettered."""
    dedupe_size: int = 512
    """The least number of handled keys remembered; the window is never smaller than
    `max_inbound_queue + max_concurrent_handlers` (1,016 by default)."""
    dedupe_path: str | None = None
    """Shortcut for `dedupe_store=SqliteDedupeStore(dedupe_path)`."""
    dedupe_store: DedupeStore | None = None
    """Where handled deliveries are remembered beyond this relay's memory:
    ``MemoryDedupeStore()`` (the default: a fresh one per relay), ``SqliteDedupeStore(path)``
    (survives a restart on the same disk) or ``RedisDedupeStore(url)`` (shared by replicas
    and hosts). Not together with ``dedupe_path``."""
    keepalive: KeepaliveConfig = DEFAULT_KEEPALIVE  # immutable: one shared by all configs
    """TCP keepalive and `TCP_USER_TIMEOUT` on the relay socket, the same provider as the
    HTTP side."""
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    """`wss` verifies certificates. Plaintext `ws://` is refused for non-loopback hosts
    unless you opt in."""
    allow_insecure: bool = False
    """Allow plaintext ``ws://`` to a host that is not loopback (off: tokens would travel
    in the clear)."""
    download_media: bool = False
    """Download each inbound media URL the connector re-hosted (``{base}/relay/media/
    {id}``, which expire after about an hour) on receipt, before ``on_message`` runs,
    into a temporary directory the relay owns: ``event.media[i].path``, deleted when the
    handler returns. A failed download is logged and leaves ``path`` as ``None``; the
    message is delivered all the same."""
    media_max_bytes: int = 25 * 1024 * 1024
    """Size cap of ``relay.media`` uploads and downloads (the connector's is 25 MB)."""
    media_stall_timeout: float = 30.0
    """A media transfer that moves no byte for this long is abandoned."""
    route_cache_size: int = 10_000
    """How many chats' routing metadata (platform, bot id, scope_id, user_id, profile,
    thread_id of their latest inbound) the relay remembers, least recently used
    evicted; see ``Relay.routes``."""
    latch_declines: bool = True
    """After the connector declines egress to a chat (``egress_declined``), answer that
    chat's further content requests (send, edit, draft, prompt, send_media, task_card)
    at once with the decline, sending no frame, until an inbound message of that chat is
    handled; one WARNING per latch, ``stats.declines_latched``, and
    ``relay.health().latched_chats`` names them. ``False``: every request goes out, for
    a caller that handles declines itself."""
    edit_interval: float = 0.5
    """Least time between two edits of a ``stream_reply`` message: platforms rate-limit
    edits, and a model writes faster than anyone reads."""
    interrupt_cancels_turn: bool | None = None
    """Whether an ``interrupt_inbound`` (the user pressed stop) cancels the message
    handler running for its chat: the turn unwinds by structure (a live card sealed with
    what it shows, a task card stopped, typing ended) and its delivery counts as handled
    and is acked, so no replay runs it again; [`Relay.interrupted`][trio_relay.Relay.interrupted]
    tells the handler why it was cancelled. ``None`` (the default): true without an
    ``on_interrupt``, false with one (the handler then decides); ``True`` with an
    ``on_interrupt`` runs it *and* cancels. Only a turn already running is stopped: a
    message still waiting in its chat's queue runs as usual."""
    retry_ambiguous: bool = True
    """Where a chat's descriptor advertises ``idempotency_window_s``, each content op
    (send, edit, delete, prompt, follow_up, send_media, task_card) carries a key of the
    relay's own, and a request whose ending is ambiguous is sent again under it on the
    next connection (or when its result does not come) until a definite answer or its
    deadline: see [`Outcome.attempts`][trio_relay.Outcome]. ``False`` keeps the frames and
    outcomes of a platform without the extension (a caller's own ``idempotency_key``
    is still sent)."""
    go_idle_on_close: bool = True
    """Leaving ``open_relay`` first sends ``going_idle`` and keeps serving until the
    connector's ``going_idle_ack`` (within ``drain_timeout``), so an event racing the
    close is delivered live or buffered for the next start, never lost."""
    wall_clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    """Unix time in seconds, read when a bearer token is minted (once per dial). Tests
    and clock-skew experiments pass their own."""
    rng: random.Random | None = field(default=None, repr=False, compare=False)
    """The one random source of a relay (backoff jitter and anything else random);
    ``None``: one ``random.Random()`` shared by every relay of the process (its state is
    2.5 KiB; one per relay was a tenth of an idle relay's memory). Pass a seeded one
    for exact, repeatable delays in tests."""
    proxy: str | bool = field(default=True, repr=False)
    """Proxy for the WebSocket: ``True`` reads ``HTTPS_PROXY`` (``wss``) or
    ``HTTP_PROXY`` (``ws``), then ``ALL_PROXY``, honouring ``NO_PROXY``, once, at the
    relay's first dial (as httpx reads them when a client is made); a URL
    (``http://[user:pass@]host:port`` for HTTP CONNECT, ``socks5://`` or ``socks5h://``
    (the proxy resolves the connector's name) for SOCKS5) uses that proxy; ``False``
    dials directly. The password never appears in a repr, a log line or an error."""
    extra_headers: tuple[tuple[str, str], ...] = ()
    """Extra HTTP headers on the upgrade request (``Authorization`` is ours)."""
    user_agent: str | None = "trio-relay"
    """The upgrade's ``User-Agent`` header; ``None`` sends none."""
    compression: bool = False
    """Offer permessage-deflate. Off by default: relay frames are small and the CPU and
    per-connection memory (about 64 KiB of zlib state a side) cost more than it saves."""
    dialer: Dialer | None = field(default=None, repr=False, compare=False)
    """Opens the byte stream for each dial: ``async (endpoint) -> stream``, a stream
    with ``receive_some``, ``send_all``, ``send_nowait`` (write what can be written
    now, return the count), ``close`` and ``aclose``. ``None`` is the real one, built
    from this config when the relay opens: TCP with happy eyeballs and the keepalive
    options, the proxy, TLS with ``ssl_context``. Tests and the soak pass
    ``trio_relay.testing.FaultDialer``/``MemoryDialer`` here to inject faults."""
    adapt_ping_interval: bool = True
    """When two links in a row are cut by the peer without a close frame after the same
    silence (something in between cuts idle connections below ``ping_interval``), log
    one WARNING naming it and ping every half that silence (never below 1 s) for the
    rest of the relay's life; a link cut there again does not climb the redial ladder.
    ``stats.effective_ping_interval`` and ``stats.idle_cut_detected`` show it. ``False``:
    the warning only, the pings stay at ``ping_interval``."""
    telemetry: TelemetryProvider | None = field(default=None, compare=False)
    """Metrics and spans of the relay: ``trio_relay.OpenTelemetry()`` (needs
    ``pip install 'trio_relay[otel]'``) sends them through OpenTelemetry. ``None``: no
    telemetry, and the relay does no telemetry work at all."""

    def __repr__(self) -> str:
        # The generated repr minus the fields marked repr=False, plus the proxy with its
        # user:password masked: a logged config or an error tracker's frame locals must
        # not ship the proxy credentials.
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr]
        proxy = self.proxy
        shown.append(f"proxy={masked_credentials(proxy) if isinstance(proxy, str) else proxy!r}")
        return f"RelayConfig({', '.join(shown)})"

    def __post_init__(self) -> None:
        positive = (
            "ping_interval",
            "ping_timeout",
            "request_timeout",
            "handshake_timeout",
            "connect_timeout",
            "drain_timeout",
            "close_timeout",
            "max_message_bytes",
            "max_line_bytes",
            "max_queued_frames",
            "max_concurrent_handlers",
            "max_inbound_queue",
            "max_delivery_attempts",
            "dedupe_size",
            "media_max_bytes",
            "media_stall_timeout",
            "route_cache_size",
            "edit_interval",
            "redial_hold_max",
        )
        for name in positive:
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"RelayConfig.{name} must be positive, got {value!r}")
        non_negative = (
            "backoff_initial",
            "backoff_max",
            "backoff_first_delay",
            "backoff_stable_after",
            "dormant_redial_delay",
        )
        for name in non_negative:
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"RelayConfig.{name} must be >= 0, got {value!r}")
        if self.dedupe_path is not None and self.dedupe_store is not None:
            raise ValueError(
                "RelayConfig: give dedupe_store or dedupe_path, not both "
                "(dedupe_path=P is short for dedupe_store=SqliteDedupeStore(P))"
            )
        if self.backoff_max < self.backoff_initial:
            raise ValueError("RelayConfig.backoff_max must be >= backoff_initial")
        for name, value in self.extra_headers:
            if name.lower() == "authorization" or "\n" in name + value or "\r" in name + value:
                raise ValueError(
                    f"RelayConfig.extra_headers: {name!r} is not allowed (Authorization "
                    "is the relay's own; no line breaks in names or values)"
                )
        if self.ping_timeout <= self.ping_interval:
            raise ValueError(
                "RelayConfig.ping_timeout must exceed ping_interval, or a healthy idle "
                "link would be declared dead between two pings"
            )
