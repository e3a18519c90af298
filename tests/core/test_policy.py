from __future__ import annotations

from typing import Any

import pytest

from trio_relay import RelevancePolicy


def test_wire_body_uses_the_contract_names() -> None:
    policy = RelevancePolicy("Slack ", require_address=True, free_response_scopes=["C1", "C2"])
    assert policy.wire_body() == {
        "platform": "slack",
        "requireAddress": True,
        "freeResponseScopes": ["C1", "C2"],
        "allowOtherBots": False,
    }


@pytest.mark.parametrize(
    ("kwargs", "default"),
    [
        ({}, True),
        ({"require_address": True}, False),
        ({"free_response_scopes": ["C1"]}, False),
        ({"allow_other_bots": True}, False),
    ],
)
def test_is_default_only_when_every_field_is(kwargs: dict[str, Any], default: bool) -> None:
    assert RelevancePolicy("slack", **kwargs).is_default is default


def test_scopes_are_deduplicated_in_order_and_frozen() -> None:
    policy = RelevancePolicy("slack", free_response_scopes=["b", "a", "b"])
    assert policy.free_response_scopes == ("b", "a")
    assert policy == RelevancePolicy("slack", free_response_scopes=("b", "a"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"platform": ""}, ValueError, "platform name"),
        ({"platform": "slack", "require_address": 1}, TypeError, "True or False"),
        ({"platform": "slack", "allow_other_bots": "yes"}, TypeError, "True or False"),
        ({"platform": "slack", "free_response_scopes": "C1"}, TypeError, r"write \('C1',\)"),
        ({"platform": "slack", "free_response_scopes": ["C1", ""]}, ValueError, "non-empty"),
    ],
)
def test_bad_values_are_refused_clearly(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        RelevancePolicy(**kwargs)
