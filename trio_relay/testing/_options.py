"""The reference connector's options: one definition, shared by every entry point.

[`open_connector`][trio_relay.testing.open_connector] and
[`serve_connector`][trio_relay.testing.serve_connector] take the
same keywords; both get them from [`ConnectorOptions`][trio_relay.testing.ConnectorOptions] through
`takes_options`, so a new option is added here, once, and both entry points (and
their type signatures) have it.
"""

from __future__ import annotations

import functools
import inspect
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .._core.frames import Outbound
from ._breaks import NO_BREAKS, ContractBreaks
from ._session import FrameObserver, Session, SessionObserver

JsonObject = dict[str, Any]
"""A decoded JSON object, as descriptors and outbound handlers' results are written."""

OutboundHandler = Callable[[Session, Outbound], Awaitable["JsonObject | None"]]
"""``async (session, frame) -> result``; a ``None`` result sends no reply at all."""



@dataclass(frozen=True, kw_only=True)
class ConnectorOptions:
    """How a reference connector listens, authenticates and answers."""

    secrets: dict[str, str] | None = None
    """Gateway id -> secret: turns on upgrade authentication, checked against
    ``clock()``. ``None`` accepts any upgrade as gateway ``"anonymous"``."""
    descriptors: dict[str, JsonObject] | None = None
    """Descriptor keys overriding the defaults, per platform; the key ``"*"`` applies to
    every platform, below the platform's own. The defaults: the required keys of
    [`default_descriptor`][trio_relay.testing.default_descriptor] and ``supported_ops``
    listing every op of the protocol (prompts, media, drafts, task cards), as
    ``trio-relay connector`` advertises; ``{"*": {"supported_ops": []}}`` plays a
    connector of the legacy set (send, edit, typing, follow_up), and
    [`live_descriptor`][trio_relay.testing.live_descriptor] turns on live cards."""
    outbound_handler: OutboundHandler | None = None
    """Answers valid ``outbound`` frames instead of the built-in answers."""
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    clock: Callable[[], float] = time.time
    """Unix seconds, for checking token expiry."""
    max_message_bytes: int = 1 << 20
    record: bool = True
    """Keep every frame, outbound and transcript; ``False`` keeps counts only (for
    benchmarks that push millions of frames)."""
    ssl_context: ssl.SSLContext | None = None
    """A server-side TLS context holding the certificate: the URL becomes ``https://``."""
    validate: bool = True
    """Check every action against the op table and the chat's tenant before answering
    it, as a real connector does; ``False`` answers anything (for tests of a gateway's
    own checks)."""
    on_frame: FrameObserver | None = None
    """``on_frame(session, direction, frame)`` sees every frame in both directions (the
    ``trio-relay connector`` frame log): the [`Session`][trio_relay.testing.Session],
    ``"in"`` (received from the gateway) or ``"out"`` (queued to it), and the decoded
    [`Frame`][trio_relay.testing.Frame] ([`Outbound`][trio_relay.testing.Outbound],
    [`Hello`][trio_relay.testing.Hello], [`InboundFrame`][trio_relay.testing.InboundFrame],
    ...; ``isinstance`` tells which). It is called synchronously, as the session reads
    or queues the frame: keep it quick."""
    breaks: ContractBreaks = NO_BREAKS
    """Promises of the protocol to break on purpose, one field each (none by default):
    a connector that drifts, for testing a conformance check."""
    idempotency_window: float | None = None
    """Seconds: advertise ``idempotency_window_s`` in every descriptor and honour
    ``idempotency_key`` (docs/protocol.md, "Idempotency keys"): a key is carried out at
    most once per gateway id within the window, a repeat answered with the first
    result (``replayed: true``), a repeat with another action refused
    (``idempotency_conflict``). ``None``: the extension is off, keys are ignored."""
    idempotency_max_keys: int = 10_000
    """Keys the connector holds at most; beyond it the oldest is forgotten first."""
    on_session: SessionObserver | None = None
    """Sees each accepted upgrade open (``"open"``; not for a refused one) and each
    accepted upgrade end (``"closed"``, refused ones included: ``session.refused``)."""

    def __post_init__(self) -> None:
        window = self.idempotency_window
        if window is not None and not window > 0:
            raise ValueError(
                f"idempotency_window must be a positive number of seconds, got {window!r}"
            )
        if self.idempotency_max_keys < 1:
            raise ValueError(
                f"idempotency_max_keys must be at least 1, got {self.idempotency_max_keys!r}"
            )


P = ParamSpec("P")
T = TypeVar("T")
Opts = TypeVar("Opts", bound=ConnectorOptions)


def takes_options(options: Callable[P, Opts]) -> Callable[[Callable[[Opts], T]], Callable[P, T]]:
    """Give a function of one options object
    ([`ConnectorOptions`][trio_relay.testing.ConnectorOptions] or a subclass)
    the keywords of that class."""

    def decorate(fn: Callable[[Opts], T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def with_keywords(*args: P.args, **kwargs: P.kwargs) -> T:
            return fn(options(*args, **kwargs))

        # help() and IDEs show the options, not (*args, **kwargs).
        with_keywords.__signature__ = inspect.signature(options)  # type: ignore[attr-defined]
        return with_keywords

    return decorate
