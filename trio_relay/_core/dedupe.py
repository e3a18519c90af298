"""Which inbound deliveries were already handled: claim, commit, release.

The connector delivers at least once, so one message may arrive many times: replayed on
every re-handshake until acked, or sent again while the first copy is still being
handled. :class:`DedupeSet` remembers each delivery's key through three states:

- *claimed* (``claim`` returned :attr:`Claim.NEW`): a handler owns it now. Another copy
  arriving meanwhile gets :attr:`Claim.IN_PROGRESS` and is dropped without ack (the
  owner will ack).
- *committed* (``commit``): the handler returned. Copies get :attr:`Claim.DONE` and are
  dropped, but acked, so the connector stops replaying them.
- *released* (``release``): the handler raised. The key is forgotten, so a redelivery is
  handled again. Marking a key seen only after success is the point: the design this
  replaces marked it *before* handling, and a crash after the mark lost the message.

Only committed keys are bounded (``capacity``, oldest evicted first): claimed keys are
bounded by the pipeline's own queue and concurrency limits, and evicting one would let a
copy run concurrently with its original.

:class:`AttemptCounter` counts how often a key's handler failed, so a delivery that can
never succeed is given up on (dead-lettered) instead of being replayed forever.

Sans-I/O: no Trio, no sockets, no files (the durable store is ``_dedupe_store.py``).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["AttemptCounter", "Claim", "DedupeSet"]


class Claim(enum.Enum):
    """What :meth:`DedupeSet.claim` found."""

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

    def __init__(self, capacity: int) -> None:
        _check_capacity(capacity)
        self._capacity = capacity
        self._claimed: set[str] = set()
        # Insertion-ordered, so the first entry is the oldest: FIFO eviction.
        self._done: OrderedDict[str, None] = OrderedDict()

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        """Committed keys held (claimed ones are not counted)."""
        return len(self._done)

    def __contains__(self, key: object) -> bool:
        """True if ``key`` is committed."""
        return key in self._done

    @property
    def claimed(self) -> frozenset[str]:
        return frozenset(self._claimed)

    def claim(self, key: str) -> Claim:
        """Take ownership of ``key`` if it is neither claimed nor committed."""
        if key in self._done:
            return Claim.DONE
        if key in self._claimed:
            return Claim.IN_PROGRESS
        self._claimed.add(key)
        return Claim.NEW

    def commit(self, key: str) -> list[str]:
        """Mark ``key`` handled; returns the committed keys evicted to make room.

        Committing an unclaimed key is allowed (it is how a durable store's keys are
        loaded). Committing a key again does not refresh its age: eviction order is
        first-commit order, as the durable store keeps it.
        """
        self._claimed.discard(key)
        if key in self._done:
            return []
        self._done[key] = None
        evicted: list[str] = []
        while len(self._done) > self._capacity:
            oldest, _ = self._done.popitem(last=False)
            evicted.append(oldest)
        return evicted

    def release(self, key: str) -> None:
        """Give up a claim without committing: the next copy is handled again.

        Releasing a committed key does nothing (a commit is never undone)."""
        self._claimed.discard(key)

    def load(self, keys: Iterable[str]) -> None:
        """Commit ``keys`` in order, oldest first (a durable store's contents)."""
        for key in keys:
            self.commit(key)


class AttemptCounter:
    """Failed attempts per key, for at most ``capacity`` keys (oldest forgotten first).

    Forgetting a key only means its delivery gets a fresh budget of attempts, so the
    bound trades a little precision under a flood of failing keys for bounded memory.
    """

    def __init__(self, capacity: int) -> None:
        _check_capacity(capacity)
        self._capacity = capacity
        self._counts: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: str) -> int:
        return self._counts.get(key, 0)

    def record_failure(self, key: str) -> int:
        """Count one more failed attempt of ``key``; returns the total so far."""
        count = self._counts.pop(key, 0) + 1
        # Re-inserted at the end: the most recently failing keys are kept longest.
        self._counts[key] = count
        while len(self._counts) > self._capacity:
            self._counts.popitem(last=False)
        return count

    def forget(self, key: str) -> None:
        """Drop the count (the key succeeded or was given up on)."""
        self._counts.pop(key, None)
