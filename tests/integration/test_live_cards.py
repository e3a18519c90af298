"""stream_reply as a live card (issue 21, item 1; docs/protocol.md, "Live cards"),
against the reference connector in mock time: throttled drafts with the whole text and
a seal where the stream is the message, a seal whose result was lost sent once more
(never a second message), a draft after the seal never sent, the fall back to send and
edits after a rejected draft with no text lost or repeated, a failed or cancelled block
sealed with what was on screen, a preview platform ending with a real send, and the old
send-and-edit reply where the capability is missing."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from live_support import EPSILON, live_relay

from trio_relay import RelayConfig
from trio_relay.testing import ReferenceConnector, live_descriptor

FINAL = {"final": True}


def is_seal(action: dict[str, object]) -> bool:
    return action.get("op") == "draft" and action.get("final") is True


def card_kinds(connector: ReferenceConnector, chat_id: str = "C1") -> list[str]:
    """What the chat saw of the reply, typing left out."""
    return [e.kind for e in connector.transcript(chat_id) if e.kind != "typing"]


async def test_drafts_carry_the_whole_text_throttled_and_the_seal_is_the_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (connector, relay, wire):
        async with relay.stream_reply("C1", reply_to="u1") as reply:
            await reply.write("Hello")  # 0.0: the first draft at once
            await trio.sleep(0.1)
            await reply.write(" wor")  # 0.1: throttled to 0.5
            await trio.sleep(0.1)
            await reply.write("ld")  # 0.2: joins that draft
            await trio.sleep(1)
            await reply.write("!")  # 1.2: the last draft was 0.7 s ago: at once
            await trio.sleep(0.1)
            await reply.write("!")  # 1.3: the block ends: the seal, not a draft
        async with relay.stream_reply("C1") as second:
            await second.write("Again")
    drafts = [(t, a["content"], a["final"], a["draft_id"]) for t, a in wire.timed("draft")]
    first_id = reply.draft_id
    assert isinstance(first_id, int) and first_id > 0
    assert drafts[:4] == [
        (0.0, "Hello", False, first_id),
        (0.5, "Hello world", False, first_id),
        (1.2, "Hello world!", False, first_id),
        (1.3, "Hello world!!", True, first_id),
    ]
    assert second.draft_id is not None and second.draft_id != first_id
    assert not wire.ops("send", "edit")  # the stream is the message
    seal = [e for e in connector.transcript("C1") if e.kind == "seal"]
    assert [(e.text, e.message_id) for e in seal] == [
        ("Hello world!!", reply.message_ids[0]),
        ("Again", second.message_ids[0]),
    ]
    assert reply.outcome is not None and reply.outcome.success
    assert reply.outcome.result["message_id"] == reply.message_ids[0]
    assert len(reply.message_ids) == 1 and reply.failed is None and reply.live
    # Typing until the first draft was on screen (each reply's own), not after.
    assert [t for t, _ in wire.timed("typing")] == [0.0, 1.3]


async def test_a_seal_whose_result_was_lost_is_sent_once_more_and_names_one_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = RelayConfig(request_timeout=2)
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, wire):
        connector.lose_results(1, where=is_seal)
        async with relay.stream_reply("C1") as reply:
            await reply.write("Hi there")
            await trio.sleep(1)
    seals = wire.timed("draft")[1:]
    assert [(t, a["content"], a["final"]) for t, a in seals] == [
        (1.0, "Hi there", True),
        (3.0, "Hi there", True),  # after the first one's request timeout
    ]
    assert seals[0][1] == seals[1][1]  # the very same frame: idempotent
    assert [(o.success, o.ambiguous) for o in reply.outcomes[-2:]] == [(False, True), (True, False)]
    assert reply.outcome is not None and reply.outcome.success
    # The connector's tombstone answered the repeat with the first seal's message.
    assert card_kinds(connector) == ["draft", "seal"]
    assert reply.message_ids == [connector.transcript("C1")[-1].message_id]
    assert not wire.ops("send", "edit")


async def test_a_seal_ambiguous_twice_stays_ambiguous_and_nothing_else_is_sent(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = RelayConfig(request_timeout=2)
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, wire):
        connector.lose_results(2, where=is_seal)
        async with relay.stream_reply("C1") as reply:
            await reply.write("Hi")  # the block ends at once: only the seal
    assert [a["final"] for a in wire.ops("draft")] == [True, True]
    assert reply.outcome is not None and reply.outcome.ambiguous
    assert reply.message_ids == [] and reply.failed is None
    assert not wire.ops("send", "edit")  # never a second message
    assert any("stayed ambiguous" in r.getMessage() for r in caplog.records)


async def test_a_draft_after_the_seal_is_never_sent_and_the_first_is_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_relay")
    async with live_relay("slack", live_descriptor()) as (connector, relay, wire):
        async with relay.stream_reply("C1") as reply:
            await reply.write("Done.")
            await trio.sleep(1)
        sent = len(wire.actions)
        late = {
            "op": "draft",
            "chat_id": "C1",
            "draft_id": reply.draft_id,
            "content": "Done. And more",
            "final": False,
        }
        stragglers = [await relay.request(late), await relay.request(late)]
        assert len(wire.actions) == sent  # neither left the gateway
        assert all(o.code == "draft_sealed" and not o.ambiguous for o in stragglers)
        assert relay.stats.requests["draft_sealed"] == 2
        # A repeated seal is not a straggler: it goes, and names the same message.
        again = await relay.request({**late, "content": "Done.", "final": True})
        assert again.success and again.result["message_id"] == reply.message_ids[0]
    logged = [r for r in caplog.records if "after its seal" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING
    assert card_kinds(connector) == ["draft", "seal"]


async def test_a_rejected_first_draft_falls_back_to_send_and_edits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (connector, relay, wire):
        connector.refuse_actions("draft", 1)
        async with relay.stream_reply("C1", reply_to="u1") as reply:
            await reply.write("Hello")
            await trio.sleep(1)
            await reply.write(" world")
            await trio.sleep(1)
            await reply.write("!")
    ops = [(a["op"], a.get("content")) for a in wire.ops()]
    assert ops == [
        ("draft", "Hello"),  # refused: the lane is unusable for this reply
        ("send", "Hello"),
        ("edit", "Hello world"),
        ("edit", "Hello world!"),
    ]
    assert wire.ops("send")[0]["reply_to"] == "u1"
    assert not reply.live and reply.failed is None
    assert reply.outcome is not None and reply.outcome.success
    assert connector.transcript_text("C1").splitlines()[-1].endswith(": Hello world!")


async def test_after_a_draft_refused_mid_stream_no_draft_goes_not_even_a_seal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        live_relay("slack", live_descriptor()) as (connector, relay, wire),
        relay.stream_reply("C1") as reply,
    ):
        await reply.write("Hello.")  # accepted: on screen
        await trio.sleep(1)
        connector.refuse_actions("draft", 1)
        await reply.write(" And more")  # this draft is refused: the lane is unusable
        await trio.sleep(1)
        await reply.write(" text")
    ops = [(a["op"], a.get("content"), a.get("final")) for a in wire.ops()]
    assert ops == [
        ("draft", "Hello.", False),
        ("draft", "Hello. And more", False),  # refused
        ("send", "And more", None),  # the stream keeps "Hello."; the rest starts after it
        ("edit", "And more text", None),
    ]
    shown = [e.text for e in connector.transcript("C1") if e.kind != "typing"]
    assert shown == ["Hello.", "And more", "And more text"]  # nothing lost, nothing twice
    assert len(reply.message_ids) == 1 and not reply.live and reply.failed is None


async def test_a_failed_block_after_a_refused_draft_seals_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (connector, relay, wire):
        with pytest.raises(ValueError, match="model broke"):
            async with relay.stream_reply("C1") as reply:
                await reply.write("Hello.")
                await trio.sleep(1)
                connector.refuse_actions("draft", 1)
                await reply.write(" More")
                await trio.sleep(1)
                raise ValueError("model broke")
    assert [a["final"] for a in wire.ops("draft")] == [False, False]  # no seal after it
    assert not reply.live


async def test_a_lost_seal_is_sent_again_with_backoff_until_a_definite_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Three seals in a row leave and their connection dies before the answer (each
    # ambiguous at once); the fourth is answered. The connector's tombstone makes every
    # repeat the same message, so the retries cost nothing.
    config = RelayConfig(
        close_timeout=5, backoff_initial=0.01, backoff_max=0.02, backoff_stable_after=0.01
    )
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, _w):
        connector.lose_results(3, where=is_seal)

        async def reset_after_each_lost_seal() -> None:
            for lost in range(1, 4):
                await connector.wait_until(
                    lambda lost=lost: sum(is_seal(f.action) for f in connector.outbound) >= lost
                )
                await connector.abort()

        # (A relay that stops repeating the seal fails here rather than hanging.)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reset_after_each_lost_seal)
                async with relay.stream_reply("C1") as reply:
                    await reply.write("Survives")
                    await trio.sleep(1)
    seals = [f for f in connector.outbound if is_seal(f.action)]
    assert len(seals) == 4 and all(f.action == seals[0].action for f in seals)
    assert [o.code for o in reply.outcomes[-4:]] == ["connection_lost"] * 3 + [None]
    assert reply.outcome is not None and reply.outcome.success
    assert len(connector.sessions) == 4
    assert card_kinds(connector) == ["draft", "seal"]  # one message, never a send
    assert reply.message_ids == [connector.transcript("C1")[-1].message_id]


async def test_a_seal_lost_past_close_timeout_stays_ambiguous_and_sends_nothing_else(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = RelayConfig(request_timeout=2, close_timeout=1.5)
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, wire):
        connector.drop_results()  # every seal is carried out, none answered
        async with relay.stream_reply("C1") as reply:
            await reply.write("Hi")
    seals = [(t, a["final"]) for t, a in wire.timed("draft")]
    # The first at 0 (lost at its 2 s timeout); the repeat at once, with what is left of
    # the 1.5 s budget as its timeout; the budget is then spent.
    assert seals == [(0.0, True), (2.0, True)]
    assert reply.outcome is not None and reply.outcome.ambiguous
    assert not wire.ops("send", "edit") and reply.failed is None
    assert any("stayed ambiguous after 2 sends" in r.getMessage() for r in caplog.records)


async def test_a_cancelled_block_is_sealed_with_what_was_on_screen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (connector, relay, wire):
        with trio.move_on_after(0.2) as scope:
            async with relay.stream_reply("C1") as reply:
                await reply.write("Step one")  # 0.0: drafted, accepted
                await trio.sleep(0.1)
                await reply.write(", step two")  # throttled to 0.5: never drafted
                await trio.sleep(1)
        assert scope.cancelled_caught
    drafts = [(t, a["content"], a["final"]) for t, a in wire.timed("draft")]
    assert drafts == [(0.0, "Step one", False), (0.2, "Step one", True)]
    assert reply.outcome is not None and reply.outcome.success
    assert card_kinds(connector) == ["draft", "seal"]


async def test_a_raising_block_is_sealed_within_close_timeout_and_reraises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = RelayConfig(close_timeout=0.75)
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, wire):
        with pytest.raises(ValueError, match="model broke"):
            async with relay.stream_reply("C1") as reply:
                await reply.write("Partial")
                await trio.sleep(0.1)
                connector.withhold_results()  # the seal will get no answer
                raise ValueError("model broke")
        ended = trio.current_time() - wire.t0
        connector.release_results()
    assert [(a["content"], a["final"]) for a in wire.ops("draft")] == [
        ("Partial", False),
        ("Partial", True),
    ]
    assert abs(ended - (0.1 + 0.75)) < EPSILON  # the seal waited close_timeout, no more
    assert reply.outcome is None or not reply.outcome.success


async def test_a_block_that_fails_before_any_draft_was_accepted_seals_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (_connector, relay, wire):
        with pytest.raises(KeyError):
            async with relay.stream_reply("C1"):
                raise KeyError("before any text")
    assert not wire.ops("draft")


@pytest.mark.parametrize(
    ("platform", "stream_is_message"),
    [("telegram", None), ("slack", False)],
    ids=["telegram", "slack-told-preview"],
)
async def test_a_preview_platform_ends_with_an_ordinary_send_split_like_send_text(
    autojump_clock: trio.testing.MockClock, platform: str, stream_is_message: bool | None
) -> None:
    descriptor = {**live_descriptor(stream_is_message=stream_is_message), "max_message_length": 12}
    async with (
        live_relay(platform, descriptor) as (connector, relay, wire),
        relay.stream_reply("C1", reply_to="u1") as reply,
    ):
        await reply.write("one two ")
        await trio.sleep(1)
        await reply.write("three four")  # the block ends: the final send, in pieces
    ops = [(a["op"], a.get("content"), a.get("final")) for a in wire.ops()]
    assert ops == [
        ("draft", "one two", False),
        ("send", "one two", None),
        ("send", "three four", None),
    ]
    sends = wire.ops("send")
    assert sends[0]["reply_to"] == "u1" and "reply_to" not in sends[1]
    assert len(reply.message_ids) == 2
    assert reply.outcome is not None and reply.outcome.success
    assert reply.outcome.result["message_id"] == reply.message_ids[-1]
    assert not any(e.kind == "seal" for e in connector.transcript("C1"))


async def test_a_stream_is_message_descriptor_seals_on_any_platform(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        live_relay("discord", live_descriptor(stream_is_message=True)) as (_c, relay, wire),
        relay.stream_reply("C1") as reply,
    ):
        await reply.write("Sealed")
        await trio.sleep(1)
    assert [(a["content"], a["final"]) for a in wire.ops("draft")] == [
        ("Sealed", False),
        ("Sealed", True),
    ]
    assert not wire.ops("send") and len(reply.message_ids) == 1


@pytest.mark.parametrize(
    "descriptor",
    [
        {"supports_draft_streaming": True, "supported_ops": ["send", "edit", "typing"]},
        {"supports_draft_streaming": True, "supported_ops": []},  # the legacy set
        {**live_descriptor(), "supports_draft_streaming": False},
    ],
    ids=["draft-not-listed", "empty-ops", "flag-off"],
)
async def test_without_the_capability_the_reply_is_sent_and_edited(
    autojump_clock: trio.testing.MockClock, descriptor: dict[str, object]
) -> None:
    async with (
        live_relay("slack", descriptor) as (_connector, relay, wire),
        relay.stream_reply("C1") as reply,
    ):
        await reply.write("Hello")
        await trio.sleep(1)
        await reply.write(" world")
    assert [(a["op"], a.get("content")) for a in wire.ops()] == [
        ("send", "Hello"),
        ("edit", "Hello world"),
    ]
    assert reply.draft_id is None and not reply.live
    assert reply.outcome is not None and reply.outcome.success


async def test_a_reply_that_outgrows_one_message_goes_on_in_new_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    descriptor = {**live_descriptor(), "max_message_length": 12}
    async with (
        live_relay("slack", descriptor) as (_connector, relay, wire),
        relay.stream_reply("C1") as reply,
    ):
        await reply.write("one two ")
        await trio.sleep(1)
        await reply.write("three four five")  # the whole text no longer fits
        await trio.sleep(1)
        await reply.write(" six")
    ops = [(a["op"], a.get("content"), a.get("final")) for a in wire.ops()]
    assert ops == [
        ("draft", "one two", False),
        ("draft", "one two", True),  # sealed as far as it showed
        ("send", "three four", None),
        ("send", "five", None),
        ("edit", "five six", None),
    ]
    assert len(reply.message_ids) == 3 and not reply.live and reply.failed is None


async def test_a_seal_lost_with_its_connection_is_sent_again_on_the_next_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with live_relay("slack", live_descriptor()) as (connector, relay, _wire):
        connector.lose_results(1, where=is_seal)

        async def reset_after_the_seal() -> None:
            await connector.wait_until(lambda: any(is_seal(f.action) for f in connector.outbound))
            await connector.abort()  # carried out, never answered: connection_lost

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reset_after_the_seal)
            async with relay.stream_reply("C1") as reply:
                await reply.write("Survives")
                await trio.sleep(1)
    seals = [f for f in connector.outbound if is_seal(f.action)]
    assert len(seals) == 2 and seals[0].action == seals[1].action
    assert [o.code for o in reply.outcomes[-2:]] == ["connection_lost", None]
    assert reply.outcome is not None and reply.outcome.success
    assert len(connector.sessions) == 2  # the repeat went on the new connection
    assert card_kinds(connector) == ["draft", "seal"]
    assert reply.message_ids == [connector.transcript("C1")[-1].message_id]


async def test_a_refused_seal_sends_only_what_the_stream_did_not_show(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with (
        live_relay("slack", live_descriptor()) as (connector, relay, wire),
        relay.stream_reply("C1") as reply,
    ):
        await reply.write("Hello.")
        await trio.sleep(1)  # accepted: on screen
        connector.refuse_actions("draft", 1)  # the seal will be refused
        await reply.write(" More")
    ops = [(a["op"], a.get("content"), a.get("final")) for a in wire.ops()]
    assert ops == [
        ("draft", "Hello.", False),
        ("draft", "Hello. More", True),  # refused
        ("send", "More", None),  # the stream keeps showing "Hello."
    ]
    assert reply.outcome is not None and reply.outcome.success and not reply.live
    assert [e.kind for e in connector.transcript("C1") if e.kind != "typing"] == [
        "draft",
        "send",
    ]


async def test_an_ambiguous_draft_needs_nothing_the_seal_has_the_whole_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    config = RelayConfig(request_timeout=2)
    async with live_relay("slack", live_descriptor(), config=config) as (connector, relay, wire):
        connector.lose_results(1, where=lambda a: a.get("final") is False)
        async with relay.stream_reply("C1") as reply:
            await reply.write("Lost draft")  # its result never comes: ambiguous at 2.0
            await trio.sleep(3)
            await reply.write(", then more")
            await trio.sleep(1)
    drafts = [(t, a["content"], a["final"]) for t, a in wire.timed("draft")]
    assert drafts == [
        (0.0, "Lost draft", False),
        (3.0, "Lost draft, then more", False),
        (4.0, "Lost draft, then more", True),
    ]
    assert reply.outcomes[0].ambiguous and reply.live
    assert reply.outcome is not None and reply.outcome.success
    assert not wire.ops("send", "edit")
