"""Prompt ids, options, the prompt action and the numbered-text fallback
(docs/protocol.md, "Prompts")."""

from __future__ import annotations

from typing import Any

import pytest

from trio_relay._core.prompts import (
    PromptOption,
    fallback_text,
    is_own,
    match_reply,
    mint_prompt_id,
    normalize_options,
    prompt_action,
)


def test_option_forms() -> None:
    options = normalize_options(
        [("yes", "Yes"), ("no", "No", "danger"), {"id": "later", "label": "Later"}, "Maybe"]
    )
    assert options == (
        PromptOption("yes", "Yes"),
        PromptOption("no", "No", "danger"),
        PromptOption("later", "Later"),
        PromptOption("4", "Maybe"),
    )
    assert options[1].to_wire() == {"id": "no", "label": "No", "style": "danger"}
    assert options[0].to_wire() == {"id": "yes", "label": "Yes"}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ([], "at least one"),
        ([("a b", "A")], r"\[A-Za-z0-9_.-\]"),
        ([("x" * 33, "X")], "1-32"),
        ([("ok", "OK"), ("ok", "Fine")], "twice"),
        ([("ok", "")], "label"),
        ([("é", "E")], r"\[A-Za-z0-9_.-\]"),
    ],
)
def test_bad_options(options: list[Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        normalize_options(options)


def test_bad_option_type() -> None:
    with pytest.raises(TypeError, match="an option is"):
        normalize_options([42])  # type: ignore[list-item]


def test_prompt_id_format_and_budget() -> None:
    prompt_id = mint_prompt_id("a1b2c3d4", "0f0f0f0f")
    assert prompt_id == "a1b2c3d4.0f0f0f0f"
    assert len(f"hp1:{prompt_id}:{'x' * 32}".encode()) <= 64
    assert is_own(prompt_id, "a1b2c3d4") and not is_own(prompt_id, "a1b2c3d")
    assert not is_own("ffffffff.0f0f0f0f", "a1b2c3d4")
    with pytest.raises(ValueError, match="outside"):
        mint_prompt_id("bad nonce", "00")
    with pytest.raises(ValueError, match="too long"):
        mint_prompt_id("n" * 30, "0" * 8)


def test_prompt_action() -> None:
    options = normalize_options([("yes", "Yes"), ("no", "No")])
    action = prompt_action("C1", "n.1", "Deploy?", options, "approval", 60, None)
    assert action == {
        "op": "prompt",
        "chat_id": "C1",
        "prompt_kind": "approval",
        "prompt_id": "n.1",
        "content": "Deploy?",
        "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
        "timeout_s": 60,
    }
    with_reply = prompt_action("C1", "n.1", "Q", options, "choice", None, "m7")
    assert with_reply["reply_to"] == "m7" and "timeout_s" not in with_reply
    with pytest.raises(ValueError, match="prompt kind"):
        prompt_action("C1", "n.1", "Q", options, "vote", None, None)


def test_fallback_text_and_replies() -> None:
    options = normalize_options([("yes", "Ship it"), ("no", "Hold")])
    assert fallback_text("Deploy?", options) == (
        "Deploy?\n\n1. Ship it\n2. Hold\n\nReply with the number of your choice."
    )
    assert match_reply("1", options) == options[0]
    assert match_reply(" 2. ", options) == options[1]
    assert match_reply("/yes", options) == options[0]
    assert match_reply("NO", options) == options[1]
    assert match_reply("ship it", options) == options[0]
    for other in ["3", "0", "", "yes please", "maybe", "-1"]:
        assert match_reply(other, options) is None, other
