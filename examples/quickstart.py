"""A complete relay round trip on loopback: the reference connector plus a client.

Run it: ``python examples/quickstart.py``
"""

import trio

import trio_relay
from trio_relay.testing import open_connector


async def handle(event: trio_relay.MessageEvent, relay: trio_relay.Relay) -> None:
    # Called once per user message, with the relay as the second argument. It runs in
    # the inbound pipeline, never on the reader: awaiting a reply here is fine.
    reply = {"op": "send", "chat_id": event.source.chat_id, "content": f"echo: {event.text}"}
    outcome = await relay.request(reply)
    print("replied:", outcome.success)


async def main() -> None:
    async with (
        open_connector(secrets={"gateway-1": "s3cret"}) as connector,
        trio_relay.open_relay(
            connector.url,
            identities=[trio_relay.Identity("slack", "B123")],
            auth=trio_relay.UpgradeAuth("gateway-1", "s3cret"),
            on_message=handle,
        ) as relay,
    ):
        await relay.wait_connected(timeout=5)
        print("descriptor:", relay.descriptors["slack"].label)

        outcome = await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
        print("sent:", outcome.success, outcome.result)

        # A buffered user message: delivered, handled once, acked after the handler.
        connector.buffer_inbound(
            {
                "text": "hello",
                "message_id": "M1",
                "source": {"platform": "slack", "chat_id": "C1", "user_id": "U1"},
            },
            gateway_id="gateway-1",
        )
        await connector.wait_acks(1)
        print("acked:", connector.acks, "stats:", relay.stats.delivered, "delivered")


if __name__ == "__main__":
    trio.run(main)
