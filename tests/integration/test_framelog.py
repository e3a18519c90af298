"""The frame log of ``trio-relay connector``: one readable line for every frame type."""

from __future__ import annotations

import pytest

from trio_relay._core.frames import (
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)
from trio_relay.testing import default_descriptor
from trio_relay.testing._framelog import describe, quote

SOURCE = {"platform": "slack", "chat_id": "C1", "user_id": "U1", "user_name": "Ada"}


@pytest.mark.parametrize(
    ("frame", "line"),
    [
        (Hello("slack", "B1"), "hello slack bot=B1"),
        (Hello("relay", ""), "hello relay bot=-"),
        (
            DescriptorFrame(default_descriptor("slack")),
            "descriptor slack max=4096 chars ops=legacy",
        ),
        (
            DescriptorFrame({**default_descriptor("tg"), "supported_ops": ["send", "prompt"]}),
            "descriptor tg max=4096 chars ops=send,prompt",
        ),
        (
            Outbound("r1", {"op": "send", "chat_id": "C1", "content": "hi\nthere"}, "slack"),
            'outbound r1 [slack] send chat_id=C1 "hi there"',
        ),
        (
            Outbound(
                "r2",
                {
                    "op": "prompt",
                    "chat_id": "C1",
                    "prompt_id": "p.1",
                    "content": "Deploy?",
                    "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
                    "metadata": {"scope_id": "T1"},
                },
            ),
            'outbound r2 prompt chat_id=C1 prompt_id=p.1 options=yes,no "Deploy?" '
            "metadata{scope_id=T1}",
        ),
        (
            Outbound(
                "r5",
                {"op": "draft", "chat_id": "C1", "draft_id": 3, "content": "Hi", "final": True},
            ),
            'outbound r5 draft chat_id=C1 draft_id=3 final "Hi"',
        ),
        (
            Outbound(
                "r6",
                {
                    "op": "task_card",
                    "chat_id": "C1",
                    "card_id": "turn:u1",
                    "chunks": [{"id": "t1", "title": "Search", "status": "pending"}],
                },
            ),
            "outbound r6 task_card chat_id=C1 card_id=turn:u1 chunks=1",
        ),
        (
            OutboundResult("r1", {"success": True, "message_id": "m1"}),
            "outbound_result r1 ok message_id=m1",
        ),
        (
            OutboundResult("r3", {"success": False, "code": "egress_declined", "error": "no"}),
            'outbound_result r3 FAILED egress_declined "no"',
        ),
        (OutboundResult("r4", {}), "outbound_result r4 FAILED"),
        (
            InboundFrame({"text": "hello", "source": SOURCE}, "buf-1"),
            'inbound buf-1 slack:C1 Ada: "hello"',
        ),
        (InboundFrame({"text": "live"}), 'inbound live ?:? ?: "live"'),
        (
            InboundFrame(
                {
                    "text": "/yes",
                    "source": SOURCE,
                    "prompt_response": {"prompt_id": "p.1", "option_id": "yes"},
                }
            ),
            "inbound live slack:C1 Ada pressed yes on p.1",
        ),
        (InboundAck("buf-1"), "inbound_ack buf-1"),
        (Interrupt("sess", None), "interrupt sess reason=None"),
        (InterruptInbound("sess", "C1"), "interrupt_inbound sess chat=C1"),
        (GoingIdle(), "going_idle"),
        (GoingIdleAck(), "going_idle_ack"),
        (
            PassthroughFrame({"platform": "slack", "method": "POST", "path": "/cmd"}, "buf-2"),
            "passthrough_forward buf-2 slack POST /cmd",
        ),
    ],
)
def test_each_frame_reads_as_one_line(frame: Frame, line: str) -> None:
    assert describe(frame) == line
    assert "\n" not in describe(frame)


def test_long_text_is_cut() -> None:
    assert quote("x" * 200) == '"' + "x" * 79 + '…"'
    assert quote('say "hi"') == '"say \\"hi\\""'
