"""The dedupe store: the memory of handled deliveries beyond one pipeline's own.

Every relay keeps a local `DedupeSet` (what it has queued,
running or recently handled; decided synchronously on the reader's submit). A
[`DedupeStore`][trio_relay.DedupeStore] is what that memory is backed by, and decides what a
*restart* or a
*sibling replica* knows:

- [`MemoryDedupeStore`][trio_relay.MemoryDedupeStore] (the default): this process only. One
  instance shared by
  several relays in one process makes them behave like replicas on a shared store.
- ``SqliteDedupeStore(path)``: committed keys in a file, so a restart on the same disk
  still drops replays. One relay per file.
- ``RedisDedupeStore(url)``: shared by every replica and host that points at it; claims
  are leases, so two replicas never run one delivery at once.

The interface is four steps, in the order the pipeline uses them:

1. `DedupeSession.load_recent` once, before anything is handled: committed keys
   the local set should know at start (oldest first).
2. `DedupeSession.claim` right before a handler runs (the local set has already
   claimed the key): ``Claim.NEW`` means run it; ``Claim.IN_PROGRESS`` means another
   holder is running it (drop this copy without ack); ``Claim.DONE`` means it was
   handled elsewhere (drop and ack). A store that cannot answer answers ``NEW``:
   fail open, since a repeat beats a lost message.
3. `DedupeSession.commit` after the handler returned, and
4. `DedupeSession.release` after it raised or was cancelled. Both never block:
   a store writes them behind (the ack does not wait; see ``_trio/stores/writer.py``
   for why either order is safe).

Sessions are opened with [`DedupeStore.open`][trio_relay.DedupeStore.open] for one pipeline's life
and bound to
one *namespace* (the gateway id), so gateways sharing a store never see each other's
keys. Sans-I/O: this module defines the interface and the in-memory store only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from .dedupe import Claim, DedupeSet
from .stats import RelayStats

__all__ = ["DedupeSession", "DedupeStore", "MemoryDedupeStore"]


class DedupeSession(Protocol):
    """One pipeline's use of a store (see the module docstring for the four steps)."""

    async def load_recent(self) -> list[str]: ...

    async def claim(self, key: str) -> Claim: ...

    def commit(self, key: str) -> None: ...

    def release(self, key: str) -> None: ...


class DedupeStore(Protocol):
    """What ``RelayConfig(dedupe_store=...)`` takes."""

    def open(
        self, *, namespace: str, capacity: int, stats: RelayStats
    ) -> AbstractAsyncContextManager[DedupeSession]:
        """A session for one pipeline. ``namespace`` is the gateway id ("" without
        upgrade auth); ``capacity`` the pipeline's dedupe window (a count-bounded store
        keeps at least that many committed keys); ``stats`` the relay's counters."""
        ...


class _MemorySession:
    def __init__(self, spaces: dict[str, DedupeSet], namespace: str) -> None:
        # The set is looked up per call: a later session with a larger window replaces it.
        self._spaces = spaces
        self._namespace = namespace

    async def load_recent(self) -> list[str]:
        return []  # the local set starts empty; shared keys are answered by claim()

    async def claim(self, key: str) -> Claim:
        return self._spaces[self._namespace].claim(key)

    def commit(self, key: str) -> None:
        self._spaces[self._namespace].commit(key)

    def release(self, key: str) -> None:
        self._spaces[self._namespace].release(key)


class MemoryDedupeStore:
    """Handled keys in this process's memory: forgotten on restart.

    A fresh one per relay is the default. Pass one instance to several relays of one
    process (``RelayConfig(dedupe_store=store)``) and they share it: a delivery
    replayed to both runs once. Per namespace it keeps the newest ``capacity``
    committed keys of the largest window that opened it.
    """

    def __init__(self) -> None:
        self._spaces: dict[str, DedupeSet] = {}

    def __repr__(self) -> str:
        return f"MemoryDedupeStore(namespaces={len(self._spaces)})"

    def open(
        self, *, namespace: str, capacity: int, stats: RelayStats
    ) -> AbstractAsyncContextManager[DedupeSession]:
        return self._session(namespace, capacity)

    @asynccontextmanager
    async def _session(self, namespace: str, capacity: int) -> AsyncIterator[DedupeSession]:
        keys = self._spaces.get(namespace)
        if keys is None or keys.capacity < capacity:
            grown = DedupeSet(capacity)
            if keys is not None:
                grown.adopt(keys)
            self._spaces[namespace] = grown
        yield _MemorySession(self._spaces, namespace)
