"""The relay's metrics at ``/metrics`` for Prometheus, through OpenTelemetry.

Needs ``pip install '.[otel,testing]' opentelemetry-sdk
opentelemetry-exporter-prometheus``. Runs a reference connector on loopback, a relay
with ``RelayConfig(telemetry=OpenTelemetry(...))``, makes a request and handles a
message, then serves the metrics until Ctrl-C (port 0: a free one, printed).

Run it: ``python examples/prometheus_exporter.py [port]``, then
``curl http://127.0.0.1:PORT/metrics``.
"""

import contextlib
import sys

import trio
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import trio_relay
from trio_relay.testing import open_connector


async def main(port: int) -> None:
    # The reader is a Prometheus collector: each scrape reads the instruments then.
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    server, _thread = start_http_server(port, addr="127.0.0.1")
    config = trio_relay.RelayConfig(telemetry=trio_relay.OpenTelemetry(meter_provider=provider))
    try:
        async with open_connector(secrets={"gateway-1": "s3cret"}) as connector:
            handled = trio.Event()

            async def handle(event: trio_relay.MessageEvent) -> None:
                await relay.request({"op": "typing", "chat_id": event.source.chat_id})
                handled.set()

            async with trio_relay.open_relay(
                connector.url,
                auth=trio_relay.UpgradeAuth("gateway-1", "s3cret"),
                on_message=handle,
                config=config,
            ) as relay:
                await relay.wait_connected(timeout=5)
                await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
                connector.buffer_inbound(
                    {
                        "text": "hello",
                        "message_id": "M1",
                        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"},
                    },
                    gateway_id="gateway-1",
                )
                await handled.wait()
                print(f"serving http://127.0.0.1:{server.server_port}/metrics", flush=True)
                await trio.sleep_forever()
    finally:
        server.shutdown()
        provider.shutdown()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is meant to stop
        trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
