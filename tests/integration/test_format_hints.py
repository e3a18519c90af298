"""Format hints (issue 21, item 3; docs/protocol.md, "Format hints") against the
reference connector: ``metadata.format_hints`` on send, edit and draft frames, from
``send_text``, ``stream_reply`` or the caller's own action, kept where the descriptor
has ``supports_block_formatting`` and stripped elsewhere (logged once per platform at
DEBUG), the rest of the metadata untouched."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from live_support import live_relay

from trio_relay.testing import live_descriptor

HINTS = {"rich_blocks": True, "markdown_blocks": True}


async def test_hints_go_out_where_the_platform_renders_blocks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    blocks = live_descriptor(drafts=False, block_formatting=True)
    async with live_relay("slack", blocks) as (connector, relay, wire):
        [sent] = await relay.send_text("C1", "Hello", format_hints=HINTS)
        async with relay.stream_reply("C1", format_hints=HINTS) as reply:
            await reply.write("Streamed")
            await trio.sleep(1)
            await reply.write(" reply")
        own = await relay.request(
            {"op": "send", "chat_id": "C1", "content": "x", "metadata": {"format_hints": HINTS}}
        )
    assert sent.success and own.success and reply.failed is None
    frames = wire.ops("send", "edit")
    assert [f["op"] for f in frames] == ["send", "send", "edit", "send"]
    assert all(f["metadata"]["format_hints"] == HINTS for f in frames)
    hinted = [e.format_hints for e in connector.transcript("C1") if e.kind != "typing"]
    assert hinted == [HINTS] * 4


async def test_hints_ride_on_drafts_and_the_seal(autojump_clock: trio.testing.MockClock) -> None:
    live = live_descriptor(block_formatting=True)
    async with (
        live_relay("slack", live) as (_connector, relay, wire),
        relay.stream_reply("C1", format_hints=HINTS) as reply,
    ):
        await reply.write("Live")
        await trio.sleep(1)
    drafts = wire.ops("draft")
    assert [d["final"] for d in drafts] == [False, True]
    assert all(d["metadata"] == {"format_hints": HINTS} for d in drafts)


async def test_hints_are_stripped_where_the_platform_does_not_render_blocks(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_relay")
    async with live_relay("telegram", live_descriptor()) as (connector, relay, wire):
        connector.say("C1", "hi", scope_id="G1")  # replies must carry the tenant
        await trio.sleep(1)
        [sent] = await relay.send_text("C1", "Hello", format_hints=HINTS)
        async with relay.stream_reply("C1", format_hints=HINTS) as reply:
            await reply.write("Previewed")
            await trio.sleep(1)
        own = await relay.request(
            {
                "op": "edit",
                "chat_id": "C1",
                "message_id": "m1",
                "content": "y",
                "metadata": {"format_hints": HINTS, "note": 1},
            }
        )
        bare = await relay.request(
            {"op": "typing", "chat_id": "C2", "metadata": {"format_hints": HINTS}}
        )
    assert sent.success and own.success and bare.success and reply.failed is None
    frames = [a for _, a in wire.actions]
    assert not any("format_hints" in f.get("metadata", {}) for f in frames)
    assert wire.ops("send")[0]["metadata"] == {"scope_id": "G1", "user_id": "U1"}
    assert wire.ops("edit")[0]["metadata"] == {"scope_id": "G1", "user_id": "U1", "note": 1}
    assert "metadata" not in wire.ops("typing")[-1]  # only hints: as if none were given
    stripped = [r for r in caplog.records if "format hints stripped" in r.getMessage()]
    assert len(stripped) == 1 and stripped[0].levelno == logging.DEBUG
    assert "'telegram'" in stripped[0].getMessage()
