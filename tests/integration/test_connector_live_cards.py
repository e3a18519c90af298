"""The reference connector's live cards, task cards and format hints (issue 21), on
the wire through a raw gateway: a seal is a message and its tombstone answers a
repeated seal with the same id, a draft after the seal is refused, task cards and hints
land in the transcript, ``live_descriptor`` advertises the capabilities, and the faults
``lose_results`` and ``refuse_actions`` act on the chosen actions only."""

from __future__ import annotations

import pytest
import trio
from connector_ops_support import action, request
from connector_support import dial, line

from trio_relay import Descriptor
from trio_relay.testing import live_descriptor, open_connector

LIVE = {
    "slack": live_descriptor(stream_is_message=True, block_formatting=True, task_cards=True)
}


async def test_a_seal_is_the_message_and_its_tombstone_answers_a_repeat() -> None:
    async with open_connector(descriptors=LIVE) as connector, dial(connector) as peer:
        wire = (await peer.handshake("slack"))["descriptor"]
        first = await request(peer, "r1", action("draft", draft_id=7, content="Hel"))
        seal = await request(peer, "r2", action("draft", draft_id=7, content="Hello", final=True))
        again = await request(peer, "r3", action("draft", draft_id=7, content="Hello", final=True))
        late = await request(peer, "r4", action("draft", draft_id=7, content="Hello!"))
        other = await request(peer, "r5", action("draft", draft_id=8, content="New"))
    assert first == {"success": True} and other == {"success": True}
    assert seal["success"] is True and seal["message_id"]
    assert again == seal  # the same message, no second stream
    assert late["success"] is False and late["code"] == "draft_sealed"
    assert "already sealed" in late["error"]
    entries = [(e.kind, e.text) for e in connector.transcript("C1")]
    assert entries == [("draft", "Hel"), ("seal", "Hello"), ("draft", "New")]
    descriptor = Descriptor.from_wire(wire)
    assert descriptor.live_cards and descriptor.stream_is_message
    assert descriptor.supports_block_formatting and descriptor.supports("task_card")


async def test_task_cards_and_format_hints_are_in_the_transcript() -> None:
    chunks = [
        {"id": "t1", "title": "Search", "status": "complete"},
        {"id": "t2", "title": "Write", "status": "in_progress", "details": "draft 2"},
    ]
    hints = {"rich_blocks": True}
    async with open_connector(descriptors=LIVE) as connector, dial(connector) as peer:
        await peer.handshake("slack")
        card = await request(peer, "r1", action("task_card", chunks=chunks))
        stop = await request(peer, "r2", action("task_card_stop"))
        sent = await request(peer, "r3", action("send", metadata={"format_hints": hints}))
    assert card == stop == {"success": True} and sent["success"] is True
    lines = connector.transcript_text("C1").splitlines()
    assert lines == [
        "bot task_card: [complete: Search] [in_progress: Write]",
        "bot task_card_stop",
        f"bot send #{sent['message_id']} {{rich_blocks}}: hi",
    ]
    assert connector.transcript("C1")[-1].format_hints == hints


async def test_lost_results_and_injected_refusals_hit_only_the_chosen_actions() -> None:
    async with open_connector(descriptors=LIVE) as connector, dial(connector) as peer:
        await peer.handshake("slack")
        connector.lose_results(1, where=lambda a: a.get("final") is True)
        connector.refuse_actions("draft", 1, code="rate_limited", error="slow down")
        refused = await request(peer, "r1", action("draft", content="a"))
        drafted = await request(peer, "r2", action("draft", content="ab"))
        seal = action("draft", content="ab", final=True)
        await peer.send(line({"type": "outbound", "requestId": "r3", "action": seal}))
        sent = await request(peer, "r4", action("send"))  # r3's result never comes
        seal_again = await request(peer, "r5", seal)
    assert refused == {"success": False, "code": "rate_limited", "error": "slow down"}
    assert drafted == {"success": True} and sent["success"] is True
    assert seal_again["success"] is True
    assert connector.results_dropped == 1
    # The lost seal was carried out all the same: the repeat found its tombstone.
    assert [e.kind for e in connector.transcript("C1")] == ["draft", "seal", "send"]


async def test_fault_arguments_are_checked() -> None:
    async with open_connector() as connector:
        with pytest.raises(ValueError, match="unknown op 'teleport'"):
            connector.refuse_actions("teleport")
        with pytest.raises(ValueError, match="count must be at least 1"):
            connector.lose_results(0, where=lambda a: True)
        await trio.lowlevel.checkpoint()
