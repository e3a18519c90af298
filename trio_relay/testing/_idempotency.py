"""The reference connector's idempotency store (docs/protocol.md, "Idempotency keys").

A connector that advertises ``idempotency_window_s`` carries out each
``idempotency_key`` at most once per gateway id within the window: a repeat gets the
first attempt's result with ``replayed: true`` (once that attempt has finished, if it is
still running), and a repeat whose action differs is refused with ``code:
"idempotency_conflict"``. The store is bounded twice: keys older than the window are
forgotten, and beyond ``max_keys`` the oldest goes first, so a gateway that sends
forever costs a fixed amount of memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from .._core.idempotency import IDEMPOTENCY_CONFLICT

__all__ = ["DEFAULT_MAX_KEYS", "IdempotencyStore", "KeyEntry"]

JsonObject = dict[str, Any]

DEFAULT_MAX_KEYS = 10_000
"""Keys held at most (per connector, all gateways together)."""


class KeyEntry:
    """One key's first attempt: its action, and its result once it has one."""

    __slots__ = ("action", "at", "done", "result")

    def __init__(self, action: Mapping[str, Any], at: float) -> None:
        self.action = dict(action)
        self.at = at
        self.result: JsonObject | None = None
        self.done = trio.Event()

    def finish(self, result: JsonObject | None) -> None:
        """The first attempt ended with ``result`` (``None``: it sent no result)."""
        self.result = result
        self.done.set()

    def replay(self) -> JsonObject | None:
        """The answer to a repeat: the first result, marked replayed."""
        return None if self.result is None else {**self.result, "replayed": True}


class IdempotencyStore:
    """Keys carried out, per gateway id, for ``window`` seconds, at most ``max_keys``."""

    def __init__(self, window: float, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        if not window > 0:
            raise ValueError(
                f"idempotency_window must be a positive number of seconds, got {window!r}"
            )
        if max_keys < 1:
            raise ValueError(f"idempotency_max_keys must be at least 1, got {max_keys!r}")
        self.window = window
        self.max_keys = max_keys
        self._entries: dict[tuple[str, str], KeyEntry] = {}
        self.carried_out = 0
        """Keys carried out (first attempts)."""
        self.replays = 0
        """Repeats answered with a first attempt's result."""
        self.conflicts = 0
        """Repeats refused because their action differed."""
        self.evicted = 0
        """Keys forgotten before their window ended (``max_keys``)."""

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, gateway_id: str, key: str, now: float) -> KeyEntry | None:
        """The first attempt under ``key`` within the window, if there was one."""
        entry = self._entries.get((gateway_id, key))
        if entry is not None and entry.at + self.window <= now:
            del self._entries[(gateway_id, key)]
            return None
        return entry

    def start(self, gateway_id: str, key: str, action: Mapping[str, Any], now: float) -> KeyEntry:
        """Record the first attempt under ``key``; the caller carries it out and calls
        `KeyEntry.finish`."""
        entries = self._entries
        # Entries are made in time order: the expired ones are at the front.
        while entries:
            oldest_key = next(iter(entries))
            if entries[oldest_key].at + self.window > now:
                break
            del entries[oldest_key]
        while len(entries) >= self.max_keys:
            del entries[next(iter(entries))]
            self.evicted += 1
        entry = entries[(gateway_id, key)] = KeyEntry(action, now)
        self.carried_out += 1
        return entry

    def forget(self, gateway_id: str, key: str, entry: KeyEntry) -> None:
        if self._entries.get((gateway_id, key)) is entry:
            del self._entries[(gateway_id, key)]

    def conflict(self, key_name: str = "idempotency_key") -> JsonObject:
        """The refusal of a repeat with another action (the key itself is not in it:
        keys are not for logs)."""
        self.conflicts += 1
        return {
            "success": False,
            "code": IDEMPOTENCY_CONFLICT,
            "error": (
                f"this {key_name} was used for a different action within the idempotency "
                "window; nothing was carried out. Use a new key for a new request"
            ),
        }
