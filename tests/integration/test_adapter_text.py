"""send_text against the reference connector: pieces that fit the chat's platform,
in order (docs/protocol.md, "Descriptor": max_message_length, len_unit)."""

from __future__ import annotations

import trio

from trio_relay import Identity, open_relay
from trio_relay.testing import open_connector

TELEGRAM = {"telegram": {"max_message_length": 10, "len_unit": "utf16"}}


async def test_utf16_pieces_with_emoji_and_astral_characters() -> None:
    text = "😀😀😀😀 𝄞𝄞𝄞\n\nhello there friend"
    async with (
        open_connector(descriptors=TELEGRAM) as connector,
        open_relay(connector.url, identities=[Identity("telegram", "T1")]) as relay,
    ):
        await relay.wait_connected(5)
        relay.routes.prime({"platform": "telegram", "chat_id": "42"})
        outcomes = await relay.send_text("42", text, reply_to="m0")
    sent = [frame.action for frame in connector.outbound]
    contents = [action["content"] for action in sent]
    assert contents == ["😀😀😀😀", "𝄞𝄞𝄞", "hello", "there", "friend"]
    assert all(len(c.encode("utf-16-le")) // 2 <= 10 for c in contents)
    assert [o.success for o in outcomes] == [True] * 5
    assert sent[0]["reply_to"] == "m0" and all("reply_to" not in a for a in sent[1:])
    assert all(frame.platform == "telegram" for frame in connector.outbound)
    transcript = [e.text for e in connector.transcript("42")]
    assert transcript == contents  # the chat reads in order


async def test_chars_count_code_points() -> None:
    descriptors = {"relay": {"max_message_length": 4, "len_unit": "chars"}}
    async with (
        open_connector(descriptors=descriptors) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        outcomes = await relay.send_text("C1", "😀😀😀😀😀")  # never heard from: default platform
    assert [f.action["content"] for f in connector.outbound] == ["😀😀😀😀", "😀"]
    assert len(outcomes) == 2


async def test_empty_text_sends_nothing_and_a_failure_stops_the_rest() -> None:
    descriptors = {"relay": {"max_message_length": 5}}
    async with (
        open_connector(descriptors=descriptors) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        assert await relay.send_text("C1", "") == []
        connector.say("C1", "hi", scope_id="G1")  # the connector now wants a scope
        with trio.fail_after(5):
            while relay.stats.delivered < 1:
                await trio.sleep(0.01)
        relay.routes.forget("C1")  # and the relay does not know it
        outcomes = await relay.send_text("C1", "one two three")
    assert len(outcomes) == 1 and outcomes[0].egress_declined
