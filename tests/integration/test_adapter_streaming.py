"""stream_reply against the reference connector, in mock time: typing until the first
text, send, throttled edits, a new message at the limit, a final edit; one message a
piece without edit; an ambiguous edit retried once, an ambiguous send never."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import trio
import trio.testing

from trio_relay import RelayConfig, open_relay
from trio_relay._core.frames import Outbound
from trio_relay.testing import Session, open_connector


@dataclass
class Op:
    at: float
    op: str
    content: str | None
    message_id: str | None


class Recorder:
    """An outbound handler that notes the mock time and op of every action; answers
    like a platform (message ids m1, m2, ...), except that the next action whose op is
    ``drop_next`` goes unanswered (the gateway's request then times out: ambiguous)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.drop_next: str | None = None
        self._messages = 0

    async def __call__(self, session: Session, frame: Outbound) -> dict[str, Any] | None:
        action = frame.action
        self.ops.append(
            Op(trio.current_time(), action["op"], action.get("content"), action.get("message_id"))
        )
        if action["op"] == self.drop_next:
            self.drop_next = None
            return None
        if action["op"] == "send":
            self._messages += 1
            return {"success": True, "message_id": f"m{self._messages}"}
        return {"success": True}

    def without_typing(self) -> list[tuple[float, str, str | None, str | None]]:
        return [(o.at, o.op, o.content, o.message_id) for o in self.ops if o.op != "typing"]


async def test_typing_send_throttled_edits_final_edit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with (
        open_connector(outbound_handler=recorder) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        t0 = trio.current_time()
        async with relay.stream_reply("C1", reply_to="u1") as reply:
            await trio.sleep(5)  # thinking: typing at 0 and 4 (a 5 s lifetime, 80%)
            await reply.write("Hello")  # 5.0: sent at once
            await trio.sleep(0.1)
            await reply.write(" wor")  # 5.1: the edit waits for 5.5
            await trio.sleep(0.1)
            await reply.write("ld")  # 5.2: joins that edit
            await trio.sleep(1)
            await reply.write("!")  # 6.2: the last edit was 0.7 s ago: at once
            await trio.sleep(0.1)
            await reply.write("!")  # 6.3: throttled to 6.7, but the block ends first
        ended = trio.current_time() - t0
    typing = [round(o.at - t0, 6) for o in recorder.ops if o.op == "typing"]
    assert typing == [0.0, 4.0]
    ops = [
        (round(at - t0, 6), op, content, mid) for at, op, content, mid in recorder.without_typing()
    ]
    assert ops == [
        (5.0, "send", "Hello", None),
        (5.5, "edit", "Hello world", "m1"),
        (6.2, "edit", "Hello world!", "m1"),
        (6.3, "edit", "Hello world!!", "m1"),  # the final edit on exit
    ]
    assert abs(ended - 6.3) < 1e-9  # the final edit is answered at once
    assert reply.message_ids == ["m1"]
    assert [o.success for o in reply.outcomes] == [True] * 4
    assert reply.text == "Hello world!!" and reply.failed is None
    send = next(f for f in connector.outbound if f.action["op"] == "send")
    assert send.action["reply_to"] == "u1"


async def test_a_full_message_continues_in_a_new_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    descriptors = {"relay": {"max_message_length": 12}}
    async with (
        open_connector(outbound_handler=recorder, descriptors=descriptors) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        async with relay.stream_reply("C1") as reply:
            await reply.write("one two ")
            await trio.sleep(1)
            await reply.write("three four five")
            await trio.sleep(1)
            await reply.write(" six")
    contents = [(op, content, mid) for _, op, content, mid in recorder.without_typing()]
    # "one two" already shows all of its piece; "three four" is full the moment it is
    # sent; "five" grows by an edit.
    assert contents == [
        ("send", "one two", None),
        ("send", "three four", None),
        ("send", "five", None),
        ("edit", "five six", "m3"),
    ]
    assert reply.message_ids == ["m1", "m2", "m3"]


async def test_without_edit_one_message_per_piece_and_typing_throughout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    descriptors = {"relay": {"supports_edit": False, "max_message_length": 10}}
    async with (
        open_connector(outbound_handler=recorder, descriptors=descriptors) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        t0 = trio.current_time()
        async with relay.stream_reply("C1") as reply:
            await reply.write("aaaa ")
            await trio.sleep(3)
            await reply.write("bbbb cccc")  # 3.0: the first piece is complete
            await trio.sleep(6)
            await reply.write(" dd")  # 9.0; the rest goes out on exit
    ops = [(round(o.at - t0, 6), o.op, o.content) for o in recorder.ops]
    assert ops == [
        (0.0, "typing", None),
        (3.0, "send", "aaaa bbbb"),
        (4.0, "typing", None),
        (8.0, "typing", None),
        (9.0, "send", "cccc dd"),
    ]
    assert reply.message_ids == ["m1", "m2"]
    assert not any(f.action["op"] == "edit" for f in connector.outbound)


async def test_an_ambiguous_edit_is_retried_once(autojump_clock: trio.testing.MockClock) -> None:
    recorder = Recorder()
    config = RelayConfig(request_timeout=2)
    async with (
        open_connector(outbound_handler=recorder) as connector,
        open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(5)
        async with relay.stream_reply("C1") as reply:
            await reply.write("Hi")
            await trio.sleep(1)
            recorder.drop_next = "edit"
            await reply.write(" there")
            await trio.sleep(5)
    edits = [o for o in recorder.ops if o.op == "edit"]
    assert [(e.content, e.message_id) for e in edits] == [("Hi there", "m1")] * 2
    assert edits[1].at - edits[0].at == 2  # the retry follows the request timeout
    assert [(o.success, o.ambiguous) for o in reply.outcomes] == [
        (True, False),
        (False, True),
        (True, False),
    ]


async def test_an_ambiguous_send_is_never_retried(autojump_clock: trio.testing.MockClock) -> None:
    recorder = Recorder()
    config = RelayConfig(request_timeout=2)
    async with (
        open_connector(outbound_handler=recorder) as connector,
        open_relay(connector.url, config=config) as relay,
    ):
        await relay.wait_connected(5)
        async with relay.stream_reply("C1") as reply:
            recorder.drop_next = "send"
            await reply.write("Hello")
            await trio.sleep(1)
            await reply.write(" world")  # while the send is out
            await trio.sleep(5)
            await reply.write(" again")
    sends = [o.content for o in recorder.ops if o.op == "send"]
    # "Hello" may be on screen: never sent again; what followed is a new message.
    assert sends == ["Hello", "world"]
    edits = [(o.content, o.message_id) for o in recorder.ops if o.op == "edit"]
    assert edits == [("world again", "m1")]
    assert reply.message_ids == ["m1"]
    assert reply.outcomes[0].ambiguous


async def test_a_failing_block_sends_nothing_more_and_writes_after_it_are_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with (
        open_connector(outbound_handler=recorder) as connector,
        open_relay(connector.url) as relay,
    ):
        await relay.wait_connected(5)
        t0 = trio.current_time()
        with pytest.raises(ValueError, match="model broke"):
            async with relay.stream_reply("C1") as reply:
                await reply.write("partial")  # 0.0: sent at once
                await trio.sleep(0.1)
                await reply.write(" more")  # its edit is throttled to 0.5 ...
                raise ValueError("model broke")  # ... and never sent
        with pytest.raises(RuntimeError, match="has ended"):
            await reply.write("late")
    assert [(o.op, o.content) for o in recorder.ops if o.op != "typing"] == [
        ("send", "partial")
    ], (recorder.ops, t0)


async def test_egress_declined_stops_the_reply(autojump_clock: trio.testing.MockClock) -> None:
    async with open_connector() as connector, open_relay(connector.url) as relay:
        await relay.wait_connected(5)
        connector.say("C1", "hi", scope_id="G1")  # the connector wants this scope
        await trio.sleep(1)
        relay.routes.forget("C1")  # and the relay does not know it
        async with relay.stream_reply("C1") as reply:
            await reply.write("hello")
            await trio.sleep(1)
            await reply.write(" again")
    assert reply.failed is not None and reply.failed.egress_declined
    assert reply.message_ids == []
    sends = [f for f in connector.outbound if f.action["op"] == "send"]
    assert len(sends) == 1  # never retried
