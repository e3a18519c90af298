"""``trio_relay.OpenTelemetry``: a relay's metrics and spans through the OpenTelemetry API.

The relay knows only the small interface of ``_core/telemetry.py``; this module is its
OpenTelemetry implementation. OpenTelemetry is imported here lazily, when an
``OpenTelemetry`` is made: ``import trio_relay`` (and a relay without telemetry) never
imports it, and without the ``otel`` extra the error names the extra to install.

Instruments are made once per meter (the SDK hands out one meter per provider and
scope), so a process with many relays on one provider holds one set; the ``relay.state``
gauge reads every live relay that uses them, each under its own ``relay`` attribute.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio

from .._core.close import ConnectionEnd
from .._core.delivery import Delivery
from .._core.event import MessageEvent
from .._core.extras import install_hint
from .._core.outcome import GATEWAY_CODES, Outcome
from .._core.passthrough import PassthroughForward
from .._core.state import State
from .._core.telemetry import DialRecord, RequestRecord, Telemetry

if TYPE_CHECKING:
    from opentelemetry.metrics import (
        CallbackOptions,
        Histogram,
        Meter,
        MeterProvider,
        Observation,
    )
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["OpenTelemetry"]

INSTALL_HINT = install_hint("otel")

SCOPE = "trio_relay"
"""The instrumentation scope of the meter and the tracer."""

_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
"""A connector's outcome code kept as a metric attribute; anything else (the network's
input, unbounded) is counted as ``failed``."""


class OpenTelemetry:
    """Metrics and spans of a relay through OpenTelemetry; give it as
    ``RelayConfig(telemetry=OpenTelemetry())``. Needs ``pip install 'trio_relay[otel]'``.

    ``meter_provider`` and ``tracer_provider``: ``None`` uses the global providers (as
    set by ``opentelemetry.metrics.set_meter_provider`` and
    ``opentelemetry.trace.set_tracer_provider``). One object may serve many relays.
    See the telemetry how-to for the metrics, spans and attributes.
    """

    __slots__ = ("meter_provider", "tracer_provider")

    def __init__(
        self,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        try:  # the error at construction, naming the extra, not at the first relay
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise ImportError(
                f"trio_relay.OpenTelemetry needs the OpenTelemetry API ({exc}), which the "
                f"base install does not include: {INSTALL_HINT}"
            ) from exc
        del metrics, trace
        self.meter_provider = meter_provider
        self.tracer_provider = tracer_provider

    def __repr__(self) -> str:
        return (
            f"OpenTelemetry(meter_provider={self.meter_provider!r}, "
            f"tracer_provider={self.tracer_provider!r})"
        )

    def for_relay(self, name: str, state: Callable[[], State | None]) -> Telemetry:
        from opentelemetry import metrics, trace

        version = _version()
        meter = metrics.get_meter(SCOPE, version or "", meter_provider=self.meter_provider)
        tracer = trace.get_tracer(SCOPE, version, tracer_provider=self.tracer_provider)
        instruments = _instruments_of(meter)
        telemetry = _RelayTelemetry(name, state, instruments, tracer)
        instruments.watch(telemetry)
        return telemetry


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trio_relay")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return None


_BY_METER: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()
"""The instruments made on each meter: made twice, the SDK would keep the first
gauge's callback and drop the second's."""


def _instruments_of(meter: Meter) -> _Instruments:
    try:
        instruments = _BY_METER.get(meter)
    except TypeError:  # a meter that cannot be weakly referenced: its own set
        return _Instruments(meter)
    if instruments is None:
        instruments = _BY_METER[meter] = _Instruments(meter)
    return instruments


SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Histogram buckets in seconds (the SDK's defaults suit milliseconds)."""


def _seconds(meter: Meter, name: str, description: str) -> Histogram:
    return meter.create_histogram(
        name, unit="s", description=description, explicit_bucket_boundaries_advisory=SECONDS
    )


class _Instruments:
    """Every instrument of the relays on one meter, made once."""

    def __init__(self, meter: Meter) -> None:
        self._relays: weakref.WeakSet[_RelayTelemetry] = weakref.WeakSet()
        # The gauge's callback runs in the exporter's thread (a Prometheus scrape, a
        # periodic reader) while relays are added in Trio's: the set is copied under it.
        self._lock = threading.Lock()
        self.dials = meter.create_counter(
            "relay.dials", unit="{dial}", description="Dials, by outcome and cause."
        )
        self.dial_duration = _seconds(
            meter, "relay.dial.duration", "From the start of a dial to its handshake (or failure)."
        )
        self.drops = meter.create_counter(
            "relay.drops", unit="{connection}", description="Connections lost, by cause."
        )
        self.requests = meter.create_counter(
            "relay.requests", unit="{request}", description="Finished requests, by outcome."
        )
        self.request_duration = _seconds(
            meter, "relay.request.duration", "From a request to its outcome."
        )
        self.delivered = meter.create_counter(
            "relay.inbound.delivered", unit="{delivery}", description="Inbound deliveries handled."
        )
        self.duplicates = meter.create_counter(
            "relay.inbound.duplicates",
            unit="{delivery}",
            description="Copies of inbound deliveries dropped (replays, copies in flight).",
        )
        self.dead_letters = meter.create_counter(
            "relay.inbound.dead_letters",
            unit="{delivery}",
            description="Inbound deliveries given up on.",
        )
        self.handler_duration = _seconds(
            meter, "relay.handler.duration", "Runs of the inbound handlers."
        )
        self.ping_rtt = _seconds(meter, "relay.ping.rtt", "WebSocket ping round trips.")
        meter.create_observable_gauge(
            "relay.state",
            callbacks=[self._observe_states],
            unit="1",
            description="1 for the state each relay is in, 0 for the others.",
        )

    def watch(self, relay: _RelayTelemetry) -> None:
        """Report ``relay``'s state in the gauge for as long as the relay lives."""
        with self._lock:
            self._relays.add(relay)

    def _observe_states(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        with self._lock:
            relays = list(self._relays)
        observations = []
        for relay in relays:
            current = relay.state()
            if current is None:
                continue
            for state in State:
                attributes = {"state": state.value, "relay": relay.name}
                observations.append(Observation(int(state is current), attributes))
        return observations


class _RelayTelemetry:
    """One relay's `Telemetry`."""

    __slots__ = ("__weakref__", "i", "name", "state", "tracer")

    def __init__(
        self, name: str, state: Callable[[], State | None], instruments: _Instruments,
        tracer: Tracer,
    ) -> None:
        self.name = name
        self.state = state
        self.i = instruments
        self.tracer = tracer

    def dial_started(self) -> DialRecord:
        return _Dial(self)

    def dropped(self, cause: str) -> None:
        self.i.drops.add(1, {"cause": cause})

    def request_started(self, op: str, request_id: str) -> RequestRecord:
        return _Request(self, op, request_id)

    def delivered(self, delivery: Delivery) -> None:
        self.i.delivered.add(1, {"platform": _platform(delivery)})

    def duplicate(self) -> None:
        self.i.duplicates.add(1)

    def dead_letter(self) -> None:
        self.i.dead_letters.add(1)

    async def handle(
        self, run: Callable[[Delivery], Awaitable[None]], delivery: Delivery
    ) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode, use_span

        attributes: dict[str, str | int] = {
            "messaging.system": "relay",
            "messaging.operation.name": "process",
            "relay.name": self.name,
            "relay.delivery.kind": delivery.kind,
            "relay.platform": _platform(delivery),
            "relay.attempt": delivery.failures + 1,
        }
        if delivery.buffer_id is not None:
            attributes["relay.buffer_id"] = delivery.buffer_id
        span = self.tracer.start_span("relay.handle", kind=SpanKind.CONSUMER, attributes=attributes)
        started = trio.current_time()
        outcome = "ok"
        try:
            # Current while the handler runs (contextvars are per Trio task): spans it
            # starts, an HTTP client's say, are children of this one.
            with use_span(span, record_exception=False, set_status_on_exception=False):
                await run(delivery)
        except trio.Cancelled:
            outcome = "cancelled"
            raise
        except BaseException as exc:
            outcome = "error"
            # The type only: an exception's text may carry what the handler held.
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute("error.type", type(exc).__qualname__)
            raise
        finally:
            if delivery.interrupted:  # the user pressed stop: cancelled on purpose
                outcome = "interrupted"
            self.i.handler_duration.record(trio.current_time() - started, {"outcome": outcome})
            span.set_attribute("relay.handler.outcome", outcome)
            span.end()

    def ping_rtt(self, seconds: float) -> None:
        self.i.ping_rtt.record(seconds)


def _platform(delivery: Delivery) -> str:
    payload = delivery.payload
    if isinstance(payload, MessageEvent):
        return payload.source.platform
    if isinstance(payload, PassthroughForward):
        return payload.platform
    return ""  # undecodable


class _Dial:
    __slots__ = ("_done", "_span", "_started", "_telemetry")

    def __init__(self, telemetry: _RelayTelemetry) -> None:
        from opentelemetry.trace import SpanKind

        self._telemetry = telemetry
        self._span: Span = telemetry.tracer.start_span(
            "relay.dial", kind=SpanKind.CLIENT, attributes={"relay.name": telemetry.name}
        )
        self._started = trio.current_time()
        self._done = False

    def up(self) -> None:
        self._finish("ok", None, None)

    def ended(self, end: ConnectionEnd | None) -> None:
        if self._done:
            return
        if end is None:
            self._finish("cancelled", None, None)
        else:
            self._finish("failed", end.cause.split(":")[0], end)

    def _finish(self, outcome: str, cause: str | None, end: ConnectionEnd | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._done = True
        telemetry = self._telemetry
        attributes = {"outcome": outcome} if cause is None else {"outcome": outcome, "cause": cause}
        telemetry.i.dials.add(1, attributes)
        telemetry.i.dial_duration.record(trio.current_time() - self._started, attributes)
        span = self._span
        span.set_attribute("relay.dial.outcome", outcome)
        if cause is not None:
            span.set_attribute("relay.dial.cause", cause)
            span.set_status(Status(StatusCode.ERROR, cause))
        if end is not None:
            if end.code is not None:
                span.set_attribute("relay.close_code", end.code)
            if end.http_status is not None:
                span.set_attribute("http.response.status_code", end.http_status)
        span.end()


class _Request:
    __slots__ = ("_op", "_span", "_started", "_telemetry")

    def __init__(self, telemetry: _RelayTelemetry, op: str, request_id: str) -> None:
        from opentelemetry.trace import SpanKind

        self._telemetry = telemetry
        self._op = op
        self._span: Span = telemetry.tracer.start_span(
            "relay.request",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "relay",
                "messaging.operation.name": op,
                "relay.request_id": request_id,
            },
        )
        self._started = trio.current_time()

    def settled(self, outcome: Outcome) -> None:
        from opentelemetry.trace import Status, StatusCode

        telemetry, op = self._telemetry, self._op
        if outcome.success:
            code, label = "ok", "success"  # label: the words of stats.requests
        elif outcome.code in GATEWAY_CODES:
            code = label = outcome.code
        else:  # the connector's refusal
            label = "failed"
            code = outcome.code if outcome.code and _CODE.fullmatch(outcome.code) else "failed"
        telemetry.i.requests.add(1, {"op": op, "code": code, "ambiguous": outcome.ambiguous})
        telemetry.i.request_duration.record(
            trio.current_time() - self._started, {"op": op, "outcome": label}
        )
        span = self._span
        span.set_attribute("relay.outcome.code", code)
        span.set_attribute("relay.outcome.ambiguous", outcome.ambiguous)
        if not outcome.success:
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()
