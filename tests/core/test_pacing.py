"""typing_interval: a typing indicator is repeated before the platform drops it."""

from __future__ import annotations

from typing import Any

import pytest

from trio_relay._core.descriptor import Descriptor
from trio_relay._core.pacing import DEFAULT_TYPING_LIFETIME, typing_interval


def descriptor(platform: str, **extra: Any) -> Descriptor:
    return Descriptor.from_wire({"contract_version": 1, "platform": platform, **extra})


@pytest.mark.parametrize(
    ("platform", "lifetime"),
    [("telegram", 5.0), ("Discord", 10.0), ("slack", DEFAULT_TYPING_LIFETIME)],
)
def test_known_platforms_repeat_at_80_percent(platform: str, lifetime: float) -> None:
    assert typing_interval(descriptor(platform)) == pytest.approx(lifetime * 0.8)


def test_the_descriptor_may_state_the_lifetime() -> None:
    assert typing_interval(descriptor("discord", typing_lifetime_s=3)) == pytest.approx(2.4)
    for bad in (0, -1, True, "5"):
        assert typing_interval(descriptor("discord", typing_lifetime_s=bad)) == 8.0


def test_no_descriptor_uses_the_shortest_common_lifetime() -> None:
    assert typing_interval(None) == pytest.approx(DEFAULT_TYPING_LIFETIME * 0.8)
