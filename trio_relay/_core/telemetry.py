"""What a relay tells a telemetry backend: a few facts, at the places that count them.

``RelayConfig.telemetry`` takes a `TelemetryProvider` (``trio_relay.OpenTelemetry``
is the one shipped); ``open_relay`` asks it once for a `Telemetry` of that relay,
which makes its instruments then. Without one (``None``, the default) every call site is
a single ``is None`` test and nothing else: no object is made per request, no backend
is imported.

The facts are those ``RelayStats`` already counts, plus the timings a counter cannot
carry. Never a secret: ids (request id, buffer id), op names, outcome codes, causes in
words, platform names.

Sans-I/O: no Trio, no backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from .close import ConnectionEnd
from .delivery import Delivery
from .outcome import Outcome
from .state import State

__all__ = ["DialRecord", "RequestRecord", "Telemetry", "TelemetryProvider"]


class DialRecord(Protocol):
    """One dial, from its start to the connection's handshake (or its failure)."""

    def up(self) -> None:
        """The handshake is done (the first descriptor arrived): the dial succeeded."""

    def ended(self, end: ConnectionEnd | None) -> None:
        """The connection is over; ``end`` is how (``None``: cancelled, the relay is
        closing). A dial that was `up` already is not counted again."""


class RequestRecord(Protocol):
    """One request, from its start to its [`Outcome`][trio_relay.Outcome]."""

    def settled(self, outcome: Outcome) -> None:
        """The request ended with ``outcome``."""


class Telemetry(Protocol):
    """The telemetry of one relay; made once, when the relay is opened."""

    def dial_started(self) -> DialRecord:
        """A dial begins."""

    def dropped(self, cause: str) -> None:
        """A connection ended by no wish of ours; ``cause`` is its kind, in words
        (``"closed by peer"``, ``"keepalive timeout"``, ...)."""

    def request_started(self, op: str, request_id: str) -> RequestRecord:
        """A request for ``op`` begins (encoded, not yet sent)."""

    def delivered(self, delivery: Delivery) -> None:
        """``delivery`` was handled (the handler returned, or an intercept took it)."""

    def duplicate(self) -> None:
        """A copy of a delivery handled or in flight (here or on another replica) was
        dropped."""

    def dead_letter(self) -> None:
        """A delivery was given up on (``on_dead_letter``)."""

    def handle(
        self, run: Callable[[Delivery], Awaitable[None]], delivery: Delivery
    ) -> Awaitable[None]:
        """``await run(delivery)``, timed, inside a span that is current while it runs
        (so that spans the handler starts are its children). Raises what ``run`` raises."""

    def ping_rtt(self, seconds: float) -> None:
        """A ping was answered after ``seconds``."""


class TelemetryProvider(Protocol):
    """What ``RelayConfig.telemetry`` takes: makes the `Telemetry` of each relay."""

    def for_relay(self, name: str, state: Callable[[], State | None]) -> Telemetry:
        """The telemetry of the relay called ``name`` (its gateway id, else its URL's
        host); ``state()`` is its state now (``None`` before the relay exists)."""
