"""What a descriptor and a result must look like to the conformance check."""

from __future__ import annotations

from trio_relay._core.contract_shapes import descriptor_problems, result_problems

GOOD = {
    "contract_version": 1,
    "platform": "slack",
    "label": "Slack",
    "max_message_length": 4096,
    "supports_draft_streaming": False,
    "supports_edit": True,
    "supports_threads": False,
    "markdown_dialect": "slack",
    "len_unit": "chars",
    "supported_ops": ["send", "edit"],
}


def test_a_descriptor_conforms_and_each_departure_is_named() -> None:
    good = GOOD
    assert descriptor_problems(good, "slack") == []
    assert descriptor_problems(good, "discord") == [
        "'platform' is 'slack', not the hello's 'discord'"
    ]
    missing = {k: v for k, v in good.items() if k != "len_unit"}
    assert descriptor_problems(missing, "slack") == ["'len_unit' is missing"]
    assert descriptor_problems({**good, "max_message_length": "4096"}, "slack") == [
        "'max_message_length' is a string, not an integer"
    ]
    assert descriptor_problems({**good, "supports_edit": 1}, "slack") == [
        "'supports_edit' is an integer, not a boolean"
    ]
    assert descriptor_problems({**good, "len_unit": "bytes"}, "slack") == [
        "'len_unit' is 'bytes', not 'chars' or 'utf16'"
    ]
    assert descriptor_problems({**good, "supported_ops": "send"}, "slack") == [
        "'supported_ops' is not a list of op names"
    ]
    assert descriptor_problems([], "slack") == ["the descriptor is a list, not an object"]


def test_result_shapes() -> None:
    assert result_problems("send", {"success": True, "message_id": 42}) == []
    assert result_problems("send", {"success": False, "error": "no", "code": "x"}) == []
    assert result_problems("send", {}) == ["'success' is missing"]
    assert result_problems("send", {"success": "true"}) == ["'success' is a string, not a boolean"]
    assert result_problems("send", {"success": True, "message_id": True}) == [
        "'message_id' is a boolean, not an id"
    ]
    assert result_problems("get_chat_info", {"success": True}) == [
        "'chat_info' is null, not an object {name, type}"
    ]
    assert result_problems("get_chat_info", {"success": False, "error": "gone"}) == []
    assert result_problems("draft", {"success": True}, seal=True) == [
        "a successful seal has no 'message_id'"
    ]
