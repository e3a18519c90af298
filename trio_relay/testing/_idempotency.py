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

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import trio

from .._core.idempotency import IDEMPOTENCY_CONFLICT

__all__ = ["DEFAULT_MAX_KEYS", "IdempotencyStore", "KeyEntry"]

JsonObject = dict[str, Any]

DEFAULT_MAX_KEYS = 10_000
"""Keys held at most (per connector, all gateways together): about 470 bytes each
(tracemalloc, 10,000 keys of 30 kB sends, their results included)."""


def fingerprint(action: Mapping[str, Any]) -> bytes:
    """16 bytes that differ for different actions: what a key's entry keeps of its
    action, rather than the action (a 30 kB message held for the whole window, for
    thousands of keys, was 48 MiB in a ten-second soak)."""
    canonical = json.dumps(action, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(canonical.encode(), digest_size=16).digest()


class KeyEntry:
    """One key's first attempt: its action's fingerprint, and its result once it has
    one."""

    __slots__ = ("_done", "at", "fingerprint", "finished", "result")

    def __init__(self, action: Mapping[str, Any], at: float) -> None:
        self.fingerprint = fingerprint(action)
        self.at = at
        self.result: JsonObject | None = None
        self.finished = False
        # Made only by a repeat that waits (an Event for every key was half of a key's
        # memory, 737 bytes a key with one, measured with tracemalloc).
        self._done: trio.Event | None = None

    def matches(self, action: Mapping[str, Any]) -> bool:
        """Whether ``action`` is the first attempt's (a repeat, not a conflict)."""
        return fingerprint(action) == self.fingerprint

    def finish(self, result: JsonObject | None) -> None:
        """The first attempt ended with ``result`` (``None``: it sent no result)."""
        self.result = result
        self.finished = True
        if self._done is not None:
            self._done.set()

    async def wait(self) -> None:
        """Return once the first attempt has ended."""
        if not self.finished:
            if self._done is None:
                self._done = trio.Event()
            await self._done.wait()

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
