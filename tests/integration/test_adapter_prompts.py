"""relay.ask against the reference connector: answered, timed out, a sibling's press,
the numbered-text fallback (docs/protocol.md, "Prompts")."""

from __future__ import annotations

import re

import trio
import trio.testing

from trio_relay import MessageEvent, PromptAnswer, Relay, open_relay
from trio_relay.testing import ReferenceConnector, open_connector

WITH_PROMPTS = {"relay": {"supported_ops": ["send", "edit", "typing", "follow_up", "prompt"]}}
OPTIONS = [("yes", "Ship it"), ("no", "Hold")]


async def sent_prompt(connector: ReferenceConnector) -> str:
    with trio.fail_after(5):
        await connector.wait_until(
            lambda: any(f.action["op"] == "prompt" for f in connector.outbound)
        )
    return next(f.action["prompt_id"] for f in connector.outbound if f.action["op"] == "prompt")


async def test_answered_inside_a_handler_of_the_same_chat() -> None:
    """The handler of C1 asks and awaits; the press arrives in C1. It must not wait
    behind the handler (which would time out), and never reach on_message."""
    answers: list[PromptAnswer | None] = []
    seen: list[str] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        seen.append(event.text)
        answers.append(await relay.ask(event.source.chat_id, "Deploy?", OPTIONS, timeout=30))

    async with (
        open_connector(descriptors=WITH_PROMPTS) as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "deploy please", user="U1", scope_id="T1")
        prompt_id = await sent_prompt(connector)
        buffer_id = connector.press(prompt_id, "yes", user="U2", user_name="Bo")
        with trio.fail_after(5):
            await connector.wait_until(lambda: buffer_id in connector.acks)
            while not answers:
                await trio.sleep(0.01)
    assert re.fullmatch(r"[0-9a-f]{8}\.[0-9a-f]{8}", prompt_id)
    prompt = next(f.action for f in connector.outbound if f.action["op"] == "prompt")
    assert prompt["prompt_kind"] == "approval" and prompt["content"] == "Deploy?"
    assert prompt["options"] == [{"id": "yes", "label": "Ship it"}, {"id": "no", "label": "Hold"}]
    assert prompt["metadata"] == {"scope_id": "T1", "user_id": "U1"}  # routed, not declined
    (answer,) = answers
    assert answer is not None
    assert (answer.prompt_id, answer.option_id, answer.label) == (prompt_id, "yes", "Ship it")
    assert answer.source.user_id == "U2" and answer.via == "button"
    assert seen == ["deploy please"]  # the press never reached on_message


async def test_timeout_returns_none(autojump_clock: trio.testing.MockClock) -> None:
    seen: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        seen.append(event)

    async with (
        open_connector(descriptors=WITH_PROMPTS) as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        start = trio.current_time()
        answer = await relay.ask("C1", "Deploy?", OPTIONS, timeout=60)
        assert answer is None
        assert trio.current_time() - start == 60
        # A late press for our own prompt is consumed all the same.
        prompt_id = await sent_prompt(connector)
        buffer_id = connector.press(prompt_id, "no")
        with trio.fail_after(5):
            await connector.wait_until(lambda: buffer_id in connector.acks)
        connector.say("C1", "after")
        with trio.fail_after(5):
            while not seen:
                await trio.sleep(0.01)
    assert [e.text for e in seen] == ["after"]


async def test_a_siblings_press_is_dropped_and_acked() -> None:
    """A connector fans a press out to every gateway of the tenant: a press on a prompt
    another process minted (another nonce) is acked and dropped, never "/yes" text."""
    seen: list[MessageEvent] = []

    async def on_message(event: MessageEvent) -> None:
        seen.append(event)

    sibling_press = {
        "text": "/yes",
        "message_type": "command",
        "message_id": "p1",
        "source": {"platform": "relay", "chat_id": "C1", "user_id": "U1"},
        "prompt_response": {"prompt_id": "5151b11b.0badcafe", "option_id": "yes"},
    }
    async with (
        open_connector(descriptors=WITH_PROMPTS) as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        buffer_id = connector.buffer_inbound(sibling_press)
        with trio.fail_after(5):
            await connector.wait_until(lambda: buffer_id in connector.acks)
        connector.say("C1", "after")
        with trio.fail_after(5):
            while not seen:
                await trio.sleep(0.01)
    assert [e.text for e in seen] == ["after"]
    assert connector.pending() == []


async def test_fallback_numbered_text_when_prompt_is_not_advertised() -> None:
    answers: list[PromptAnswer | None] = []
    seen: list[str] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        seen.append(event.text)
        if event.text == "deploy":
            answers.append(await relay.ask(event.source.chat_id, "Deploy?", OPTIONS))

    async with (
        # A connector of the legacy set (the reference connector lists every op by default).
        open_connector(descriptors={"*": {"supported_ops": []}}) as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "deploy")
        with trio.fail_after(5):
            await connector.wait_until(lambda: len(connector.outbound) >= 1)
        connector.say("C1", "something else", user="U3")  # not an answer: a message
        connector.say("C1", "2", user="U2")
        with trio.fail_after(5):
            while not answers or len(seen) < 2:
                await trio.sleep(0.01)
    (question,) = [f.action for f in connector.outbound]
    assert question["op"] == "send"
    assert question["content"] == (
        "Deploy?\n\n1. Ship it\n2. Hold\n\nReply with the number of your choice."
    )
    (answer,) = answers
    assert answer is not None
    assert (answer.option_id, answer.label, answer.via) == ("no", "Hold", "text")
    assert answer.source.user_id == "U2"
    assert seen == ["deploy", "something else"]  # the answer "2" was consumed


async def test_the_reference_connectors_defaults_show_ask_as_buttons() -> None:
    # open_connector() once advertised the legacy set only, so ask fell back to a
    # numbered list there, while `trio-relay connector` advertised every op.
    answers: list[PromptAnswer | None] = []

    async def on_message(event: MessageEvent, relay: Relay) -> None:
        answers.append(await relay.ask(event.source.chat_id, "Deploy?", OPTIONS, timeout=30))

    async with (
        open_connector() as connector,
        open_relay(connector.url, on_message=on_message) as relay,
    ):
        await relay.wait_connected(5)
        connector.say("C1", "deploy please")
        with trio.fail_after(5):
            await connector.wait_until(lambda: connector.latest_prompt("C1") is not None)
        shown = connector.latest_prompt("C1")
        assert shown is not None
        assert shown.question == "Deploy?" and shown.options == (("yes", "Ship it"), ("no", "Hold"))
        buffer_id = connector.press(shown.prompt_id, "no")
        with trio.fail_after(5):
            await connector.wait_until(lambda: buffer_id in connector.acks)
            await connector.wait_until(lambda: bool(answers))
    assert [f.action["op"] for f in connector.outbound] == ["prompt"]
    (answer,) = answers
    assert answer is not None and (answer.option_id, answer.via) == ("no", "button")
