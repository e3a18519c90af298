"""Which inbound deliveries were already handled: claim, commit, release.

The connector delivers at least once, so one message may arrive many times: replayed on
every re-handshake until acked, or sent again while the first copy is still being
handled. `DedupeSet` remembers each delivery's key through three states:

- *claimed* (``claim`` returned `Claim.NEW`): a handler owns it now. Another copy
  arriving meanwhile gets `Claim.IN_PROGRESS` and is dropped without ack (the
  owner will ack).
- *committed* (``commit``): the handler returned. Copies get `Claim.DONE` and are
  dropped, but acked, so the connector stops replaying them.
- *released* (``release``): the handler raised. The key is forgotten, so a redelivery is
  handled again. Marking a key seen only after success is the point: the design this
  replaces marked it *before* handling, and a crash after the mark lost the message.

Only committed keys are bounded (``capacity``, oldest evicted first): claimed keys are
bounded by the pipeline's own queue and concurrency limits, and evicting one would let a
copy run concurrently with its original.

A committed key can be *pinned* (``commit(key, pinned=True)``): it is then never evicted
until `DedupeSet.unpin`. The pipeline pins every handled delivery until its ack
has been handed to a socket: until then the connector still holds it and will replay
it, so forgetting its key before the ack is out would run the handler again (a replay
storm with lost acks did exactly that when the window was count-bounded only). Pinned
keys do not count against ``capacity``; they are bounded by what the connector holds
unacked.

Sans-I/O: no Trio, no sockets, no files (what backs this set is ``dedupe_store.py``).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["Claim", "DedupeSet", "dedupe_window"]


def dedupe_window(dedupe_size: int, max_inbound_queue: int, max_concurrent_handlers: int) -> int:
    """How many committed keys a pipeline keeps (besides pinned ones).

    Never fewer than the pipeline can hold at once (queued plus running): a connector
    replays *everything* unacked on each handshake, so a window smaller than one
    replay's worth evicts, while handling it, the keys the next replay needs. With 512
    keys against a queue of 1,000 that ran handlers up to 11 times per message.
    """
    return max(dedupe_size, max_inbound_queue + max_concurrent_handlers)


class Claim(enum.Enum):
    """What `DedupeSet.claim` found."""

    NEW = "new"
    """Not seen (or released after a failure): the caller owns the key now."""
    IN_PROGRESS = "in_progress"
    """Claimed by someone else and not yet committed or released."""
    DONE = "done"
    """Committed: handled already."""


def _check_capacity(capacity: int) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise ValueError(f"capacity must be a positive int, got {capacity!r}")


class DedupeSet:
    """Claimed and committed delivery keys; at most ``capacity`` committed ones."""

    __slots__ = ("_capacity", "_claimed", "_done", "_pinned")  # no __dict__: one per relay

    def __init__(self, capacity: int) -> None:
        _check_capacity(capacity)
        self._capacity = capacity
        # Key sets as dicts (values unused): an empty dict is 64 bytes, an empty set 216,
        # and every idle relay holds these empty.
        self._claimed: dict[str, None] = {}
        # Insertion-ordered, so the first entry is the oldest: FIFO eviction.
        self._done: OrderedDict[str, None] = OrderedDict()
        self._pinned: dict[str, None] = {}  # committed, exempt from eviction until unpinned

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        """Committed keys held, pinned ones included (claimed ones are not counted)."""
        return len(self._done) + len(self._pinned)

    def __contains__(self, key: object) -> bool:
        """True if ``key`` is committed."""
        return key in self._done or key in self._pinned

    @property
    def pinned(self) -> frozenset[str]:
        return frozenset(self._pinned)

    @property
    def claimed(self) -> frozenset[str]:
        return frozenset(self._claimed)

    def claim(self, key: str) -> Claim:
        """Take ownership of ``key`` if it is neither claimed nor committed."""
        if key in self._done or key in self._pinned:
            return Claim.DONE
        if key in self._claimed:
            return Claim.IN_PROGRESS
        self._claimed[key] = None
        return Claim.NEW

    def commit(self, key: str, *, pinned: bool = False) -> list[str]:
        """Mark ``key`` handled; returns the committed keys evicted to make room.

        Committing an unclaimed key is allowed (it is how a durable store's keys are
        loaded). Committing a key again does not refresh its age: eviction order is
        first-commit order, as the durable store keeps it. ``pinned`` keeps the key
        from eviction until `unpin` (pinning a committed key again is allowed).
        """
        self._claimed.pop(key, None)
        if key in self._pinned:
            return []
        if pinned:
            self._done.pop(key, None)
            self._pinned[key] = None
            return []
        if key in self._done:
            return []
        return self._append(key)

    def unpin(self, key: str) -> list[str]:
        """Make a pinned key evictable again (as the newest); returns keys evicted.
        Unpinning a key that is not pinned does nothing."""
        if key not in self._pinned:
            return []
        del self._pinned[key]
        return self._append(key)

    def _append(self, key: str) -> list[str]:
        self._done[key] = None
        evicted: list[str] = []
        while len(self._done) > self._capacity:
            oldest, _ = self._done.popitem(last=False)
            evicted.append(oldest)
        return evicted

    def release(self, key: str) -> None:
        """Give up a claim without committing: the next copy is handled again.

        Releasing a committed key does nothing (a commit is never undone)."""
        self._claimed.pop(key, None)

    def adopt(self, other: DedupeSet) -> None:
        """Take over ``other``'s claims and committed keys (to grow a shared set)."""
        self._claimed |= other._claimed
        self._pinned |= other._pinned
        self.load(other._done)

    def load(self, keys: Iterable[str]) -> None:
        """Commit ``keys`` in order, oldest first (a durable store's contents)."""
        for key in keys:
            self.commit(key)
