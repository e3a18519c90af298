"""Inbound enrichments: reply_to, context, context_error, prompt_response
(docs/protocol.md, "Inbound event")."""

from __future__ import annotations

from typing import Any

import pytest

from trio_relay._core.enrichments import ContextMessage, PromptResponse, ReplyTo
from trio_relay._core.event import MessageEvent


def event(**fields: Any) -> MessageEvent:
    return MessageEvent.from_wire({"text": "hi", "source": {"chat_id": "C1"}, **fields})


def test_absent_enrichments() -> None:
    e = event()
    assert e.reply_to is None
    assert e.context == ()
    assert e.context_error is False
    assert e.prompt_response is None


def test_reply_to() -> None:
    e = event(reply_to={"text": "earlier answer", "author": "bot", "is_own": True, "x": 1})
    assert e.reply_to == ReplyTo(text="earlier answer", author="bot", is_own=True)
    assert e.reply_to is not None and e.reply_to.raw["x"] == 1


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({}, ReplyTo()),
        ({"text": 5, "author": ["x"], "is_own": "yes"}, ReplyTo()),
        ({"author": {"user_name": "ann"}}, ReplyTo(author="ann")),
        ({"is_own": 1}, ReplyTo()),
    ],
)
def test_reply_to_lenient(wire: dict[str, Any], expected: ReplyTo) -> None:
    assert event(reply_to=wire).reply_to == expected


@pytest.mark.parametrize("wire", [None, "quoted", 3, ["text"]])
def test_reply_to_malformed_is_absent(wire: Any) -> None:
    assert event(reply_to=wire).reply_to is None


def test_context_oldest_first_and_read_only() -> None:
    e = event(
        context=[
            {"text": "first", "source": {"user_name": "ann", "user_id": 7}},
            {"text": "second", "source": "nope"},
            {"no_text": True},
            "junk",
        ],
        context_error=False,
    )
    assert e.context == (
        ContextMessage("first", "ann", "7"),
        ContextMessage("second"),
    )
    assert isinstance(e.context, tuple)


@pytest.mark.parametrize(("wire", "expected"), [(True, True), (False, False), ("true", False)])
def test_context_error(wire: Any, expected: bool) -> None:
    assert event(context_error=wire).context_error is expected


def test_prompt_response() -> None:
    e = event(
        text="/yes",
        message_type="command",
        prompt_response={
            "prompt_id": "n0nce.0a1b2c3d",
            "option_id": "yes",
            "label": "Yes",
            "prompt_message_id": 42,
        },
    )
    assert e.prompt_response == PromptResponse("n0nce.0a1b2c3d", "yes", "Yes", "42")
    assert e.message_type == "command" and e.text == "/yes"


@pytest.mark.parametrize(
    "wire",
    [None, "x", {}, {"prompt_id": "p"}, {"option_id": "o"}, {"prompt_id": "", "option_id": "o"}],
)
def test_prompt_response_malformed_is_absent(wire: Any) -> None:
    assert event(prompt_response=wire).prompt_response is None
