"""The parts of RelayConfig each subsystem gets: equal parts are one shared object,
unless a part holds the caller's own object (kept alive otherwise)."""

from __future__ import annotations

import ssl

from trio_relay import MemoryDedupeStore, RelayConfig
from trio_relay._core.settings import (
    ConnectionSettings,
    DialSettings,
    InboundSettings,
    RoutesSettings,
)


def test_equal_configs_share_their_parts() -> None:
    one, two = RelayConfig(ping_interval=7.0), RelayConfig(ping_interval=7.0)
    for part in (ConnectionSettings, DialSettings, InboundSettings, RoutesSettings):
        assert part.from_config(one) is part.from_config(two)  # type: ignore[attr-defined]


def test_different_settings_are_different_parts() -> None:
    fast = ConnectionSettings.from_config(RelayConfig(ping_interval=3.0))
    slow = ConnectionSettings.from_config(RelayConfig(ping_interval=30.0))
    assert (fast.ping_interval, slow.ping_interval) == (3.0, 30.0)


def test_a_part_holding_the_callers_object_is_not_kept() -> None:
    store = MemoryDedupeStore()
    with_store = RelayConfig(dedupe_store=store)
    first = InboundSettings.from_config(with_store)
    assert first.dedupe_store is store
    assert InboundSettings.from_config(with_store) is not first
    context = ssl.create_default_context()
    with_context = RelayConfig(ssl_context=context)
    assert RoutesSettings.from_config(with_context) is not RoutesSettings.from_config(
        with_context
    )
