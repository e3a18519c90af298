"""Telemetry through OpenTelemetry: the metrics and spans of the telemetry how-to, read
with the SDK's in-memory reader and exporter, from a relay on the reference connector;
and with ``telemetry=None`` (the default) OpenTelemetry is never even imported."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from relay_support import bearer_tokens

import trio_relay
from trio_relay import MessageEvent, OpenTelemetry, RelayConfig, UpgradeAuth
from trio_relay.testing import JsonObject, ReferenceConnector, Session, open_connector

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GATEWAY, SECRET = "gw-otel", "otel-secret-do-not-leak"
SEND = {"op": "send", "chat_id": "C1", "content": "hi"}


@dataclass
class Otel:
    reader: InMemoryMetricReader
    spans: InMemorySpanExporter
    tracer_provider: TracerProvider
    telemetry: OpenTelemetry

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, point)`` of every data point of metric ``name``."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += [(dict(p.attributes or {}), p) for p in metric.data.data_points]
        return found

    def values(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Counter or gauge values (histograms: their counts) by sorted attributes."""
        return {
            tuple(sorted(attrs.items())): (
                point.count if isinstance(point, HistogramDataPoint) else point.value
            )
            for attrs, point in self.points(name)
        }

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]


@pytest.fixture
def otel() -> Iterator[Otel]:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    yield Otel(reader, spans, tracer_provider, OpenTelemetry(meter_provider, tracer_provider))
    meter_provider.shutdown()
    tracer_provider.shutdown()


def config(otel: Otel, **overrides: Any) -> RelayConfig:
    return RelayConfig(close_timeout=0.2, telemetry=otel.telemetry, **overrides)


def event(text: str, message_id: str) -> JsonObject:
    return {
        "text": text,
        "message_id": message_id,
        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"},
    }


def key(**attributes: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(attributes.items()))


async def refuse_no(session: Session, frame: Any) -> JsonObject | None:
    # The connector's answer: "no" is refused with a code of the connector's own.
    if frame.action.get("content") == "no":
        return {"success": False, "code": "rate_limited", "error": "slow down"}
    return {"success": True, "message_id": "m1"}


@pytest.fixture
async def connector() -> AsyncIterator[ReferenceConnector]:
    async with open_connector(secrets={GATEWAY: SECRET}, outbound_handler=refuse_no) as connector:
        yield connector


def every_attribute_value(otel: Otel) -> list[str]:
    values: list[str] = []
    for span in otel.spans.get_finished_spans():
        values += [str(v) for v in (span.attributes or {}).values()]
        values.append(str(span.status.description))
        for ev in span.events:
            values += [str(v) for v in (ev.attributes or {}).values()]
    data = otel.reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    values += [str(v) for v in (point.attributes or {}).values()]
    return values


async def test_requests_dials_and_state_are_measured_and_traced(
    otel: Otel, connector: ReferenceConnector
) -> None:
    async with trio_relay.open_relay(
        connector.url, auth=UpgradeAuth(GATEWAY, SECRET), config=config(otel)
    ) as relay:
        await relay.wait_connected(5)
        assert (await relay.request(SEND)).success
        refused = await relay.request({**SEND, "content": "no"})
        assert refused.code == "rate_limited"
        assert await relay.request({"op": "no_such_op", "chat_id": "C1"}) is not None
        states = otel.values("relay.state")
    assert states[key(relay=GATEWAY, state="connected")] == 1
    assert sum(states.values()) == 1 and len(states) == len(trio_relay.State)

    assert otel.values("relay.requests") == {
        key(op="send", code="ok", ambiguous=False): 1,
        key(op="send", code="rate_limited", ambiguous=False): 1,
        key(op="no_such_op", code="unsupported_op", ambiguous=False): 1,
    }
    assert otel.values("relay.request.duration") == {
        key(op="send", outcome="success"): 1,
        key(op="send", outcome="failed"): 1,
        key(op="no_such_op", outcome="unsupported_op"): 1,
    }
    ok_span, refused_span, unsupported_span = otel.finished("relay.request")
    sent_ids = [frame.request_id for frame in connector.outbound]
    assert ok_span.kind is SpanKind.PRODUCER
    assert dict(ok_span.attributes or {}) == {
        "messaging.system": "relay",
        "messaging.operation.name": "send",
        "relay.request_id": sent_ids[0],
        "relay.outcome.code": "ok",
        "relay.outcome.ambiguous": False,
    }
    assert ok_span.status.status_code is StatusCode.UNSET
    assert (refused_span.attributes or {})["relay.request_id"] == sent_ids[1]
    assert (refused_span.attributes or {})["relay.outcome.code"] == "rate_limited"
    assert refused_span.status.status_code is StatusCode.ERROR
    assert (unsupported_span.attributes or {})["relay.outcome.code"] == "unsupported_op"

    assert otel.values("relay.dials") == {key(outcome="ok"): 1}
    assert otel.values("relay.dial.duration") == {key(outcome="ok"): 1}
    (dial,) = otel.finished("relay.dial")
    assert (dial.attributes or {})["relay.dial.outcome"] == "ok"
    assert (dial.attributes or {})["relay.name"] == GATEWAY
    # After the block the relay is closed: the gauge says so.
    assert otel.values("relay.state")[key(relay=GATEWAY, state="closed")] == 1
    tokens = [token for token in bearer_tokens(connector) if token]
    assert tokens
    for value in every_attribute_value(otel):
        assert SECRET not in value
        assert all(token not in value for token in tokens)


async def test_relays_sharing_one_provider_each_report_their_state(otel: Otel) -> None:
    # One set of instruments per meter: the second relay's state is in the same gauge.
    async with (
        open_connector(secrets={"gw-a": SECRET, "gw-b": SECRET}) as connector,
        trio_relay.open_relay(
            connector.url, auth=UpgradeAuth("gw-a", SECRET), config=config(otel)
        ) as first,
    ):
        await first.wait_connected(5)
        async with trio_relay.open_relay(
            connector.url, auth=UpgradeAuth("gw-b", SECRET), config=config(otel)
        ) as second:
            await second.wait_connected(5)
            both = otel.values("relay.state")
        after = otel.values("relay.state")
    assert both[key(relay="gw-a", state="connected")] == 1
    assert both[key(relay="gw-b", state="connected")] == 1
    assert after[key(relay="gw-a", state="connected")] == 1
    assert after[key(relay="gw-b", state="closed")] == 1
    assert otel.values("relay.dials") == {key(outcome="ok"): 2}


async def test_a_timeout_is_ambiguous_in_the_metrics_and_on_the_span(
    otel: Otel, connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio_relay.open_relay(
        connector.url, auth=UpgradeAuth(GATEWAY, SECRET), config=config(otel)
    ) as relay:
        await relay.wait_connected(5)
        connector.drop_results()
        outcome = await relay.request(SEND, timeout=2)
        connector.drop_results(False)
    assert outcome.code == "timeout" and outcome.ambiguous
    assert otel.values("relay.requests") == {key(op="send", code="timeout", ambiguous=True): 1}
    (span,) = otel.finished("relay.request")
    assert (span.attributes or {})["relay.outcome.code"] == "timeout"
    assert (span.attributes or {})["relay.outcome.ambiguous"] is True


async def test_drops_and_failed_dials_are_counted_by_cause(
    otel: Otel, connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio_relay.open_relay(
        connector.url, auth=UpgradeAuth(GATEWAY, SECRET), config=config(otel)
    ) as relay:
        await relay.wait_connected(5)
        await connector.stop()  # a reset, and nobody listening for the redials
        await relay.wait_state(trio_relay.State.RECONNECTING, timeout=5)
        while relay.stats.dial_failures < 2:
            await trio.sleep(0.5)
        await connector.start()
        await relay.wait_connected(60)
        drops, failures = dict(relay.stats.drops), relay.stats.dial_failures
        dials = otel.values("relay.dials")
        failed_span = otel.finished("relay.dial")[1]
    assert otel.values("relay.drops") == {key(cause=cause): n for cause, n in drops.items()}
    assert sum(drops.values()) == 1
    assert dials == {key(outcome="ok"): 2, key(outcome="failed", cause="connect failed"): failures}
    assert (failed_span.attributes or {})["relay.dial.cause"] == "connect failed"
    assert failed_span.status.status_code is StatusCode.ERROR


async def test_inbound_deliveries_duplicates_dead_letters_and_handler_runs(
    otel: Otel, connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    tracer = otel.tracer_provider.get_tracer("the-application")
    handled = trio.Event()

    async def handle(message: MessageEvent) -> None:
        if message.text == "fail":
            raise RuntimeError("the handler's own failure")
        # Started inside the handler: a child of relay.handle, as an HTTP call's would be.
        with tracer.start_as_current_span("app.work"):
            await relay.request({"op": "typing", "chat_id": "C1"})
        handled.set()

    dead: list[trio_relay.DeadLetter] = []

    async def on_dead_letter(letter: trio_relay.DeadLetter) -> None:
        dead.append(letter)

    async with trio_relay.open_relay(
        connector.url,
        auth=UpgradeAuth(GATEWAY, SECRET),
        on_message=handle,
        on_dead_letter=on_dead_letter,
        config=config(otel, max_delivery_attempts=1),
    ) as relay:
        await relay.wait_connected(5)
        buffer_id = connector.buffer_inbound(event("hello", "M1"), gateway_id=GATEWAY)
        await handled.wait()
        await connector.send_inbound(event("hello", "M1"))  # a copy: dropped
        await connector.send_inbound(event("fail", "M2"))  # one attempt: a dead letter
        while not dead:
            await trio.sleep(0.1)
        while relay.stats.replays_dropped < 1:
            await trio.sleep(0.1)
    assert otel.values("relay.inbound.delivered") == {key(platform="relay"): 1}
    assert otel.values("relay.inbound.duplicates") == {(): 1}
    assert otel.values("relay.inbound.dead_letters") == {(): 1}
    assert otel.values("relay.handler.duration") == {key(outcome="ok"): 1, key(outcome="error"): 1}

    ok_run, failed_run = otel.finished("relay.handle")
    assert ok_run.kind is SpanKind.CONSUMER
    assert dict(ok_run.attributes or {}) == {
        "messaging.system": "relay",
        "messaging.operation.name": "process",
        "relay.name": GATEWAY,
        "relay.delivery.kind": "message",
        "relay.platform": "relay",
        "relay.attempt": 1,
        "relay.buffer_id": buffer_id,
        "relay.handler.outcome": "ok",
    }
    assert failed_run.status.status_code is StatusCode.ERROR
    assert (failed_run.attributes or {})["error.type"] == "RuntimeError"
    assert (failed_run.attributes or {})["relay.handler.outcome"] == "error"
    # The handler's own span, and the request it made inside it, are children of its run.
    (work,) = otel.finished("app.work")
    (typing,) = otel.finished("relay.request")
    assert ok_run.context is not None and work.context is not None
    assert work.parent is not None and work.parent.span_id == ok_run.context.span_id
    assert typing.parent is not None and typing.parent.span_id == work.context.span_id
    assert work.context.trace_id == ok_run.context.trace_id
    assert "the handler's own failure" not in every_attribute_value(otel)


async def test_ping_round_trips_are_measured(otel: Otel, connector: ReferenceConnector) -> None:
    async with trio_relay.open_relay(
        connector.url, auth=UpgradeAuth(GATEWAY, SECRET), config=config(otel)
    ) as relay:
        await relay.wait_connected(5)
        rtt = await relay.ping()
    ((attributes, point),) = otel.points("relay.ping.rtt")
    assert attributes == {} and point.count == 1 and point.sum == pytest.approx(rtt)


def test_without_telemetry_opentelemetry_is_never_imported() -> None:
    script = textwrap.dedent(
        """
        import sys
        import trio
        import trio_relay
        from trio_relay.testing import open_connector

        async def main():
            async with open_connector() as connector:
                handled = trio.Event()

                async def handle(event):
                    handled.set()

                async with trio_relay.open_relay(connector.url, on_message=handle) as relay:
                    await relay.wait_connected(5)
                    send = {"op": "send", "chat_id": "C1", "content": "x"}
                    assert (await relay.request(send)).success
                    await relay.ping()
                    connector.buffer_inbound({"text": "hi", "message_id": "M1",
                        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"}})
                    await handled.wait()
            print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))

        trio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_the_error_names_it() -> None:
    # A fresh interpreter where the OpenTelemetry API cannot be imported (a None entry in
    # sys.modules is how Python marks a module as not importable).
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None
        import trio_relay
        try:
            trio_relay.OpenTelemetry()
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'trio_relay[otel]'" in done.stdout
    assert "from a checkout: pip install '.[otel]'" in done.stdout


def test_the_prometheus_example_serves_the_relay_series() -> None:
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "prometheus_exporter.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert example.stdout is not None
        line = example.stdout.readline()
        assert line.startswith("serving http://127.0.0.1:"), line or example.stderr.read()
        url = line.split()[1]
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
    finally:
        example.send_signal(signal.SIGINT)
        _, err = example.communicate(timeout=30)
    assert example.returncode == 0, err
    series = [line for line in page.splitlines() if line.startswith("relay_")]
    assert any(
        s.startswith("relay_requests_total{") and 'op="send"' in s and 'code="ok"' in s
        for s in series
    ), page
    assert any(s.startswith("relay_inbound_delivered_total{") for s in series), page
    assert any(
        s.startswith("relay_state{") and 'state="connected"' in s and s.endswith(" 1.0")
        for s in series
    ), page
    assert any(s.startswith("relay_handler_duration_seconds_count{") for s in series), page


async def test_a_turn_the_user_stopped_is_marked_interrupted(
    otel: Otel, connector: ReferenceConnector, autojump_clock: trio.testing.MockClock
) -> None:
    async def handle(message: MessageEvent) -> None:
        await trio.sleep_forever()

    async with trio_relay.open_relay(
        connector.url, auth=UpgradeAuth(GATEWAY, SECRET), on_message=handle, config=config(otel)
    ) as relay:
        await relay.wait_connected(5)
        connector.buffer_inbound(event("long job", "M1"), gateway_id=GATEWAY)
        await trio.sleep(1)
        assert connector.press_stop("C1")
        await connector.wait_acks(1)
        assert relay.stats.turns_interrupted == 1
    assert otel.values("relay.handler.duration") == {key(outcome="interrupted"): 1}
    (run,) = otel.finished("relay.handle")
    assert (run.attributes or {})["relay.handler.outcome"] == "interrupted"
