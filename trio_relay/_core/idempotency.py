"""Idempotency keys (docs/protocol.md, "Idempotency keys"): which ops carry one, what a
key may look like, the relay's own keys, and when an ambiguous request is sent again.

A connector that advertises ``idempotency_window_s`` carries out each key at most once
within that window and answers a repeat with the first attempt's result. For such a
platform the gateway puts ``idempotency_key`` in the action of every content op, and a
request whose ending is ambiguous (written, then the connection ended or the result
did not come) is sent again, the same action under the same key, until a definite
answer or its own deadline. `ResendPlan` decides when; the shell carries it out.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "CONTENT_OPS",
    "IDEMPOTENCY_CONFLICT",
    "IDEMPOTENCY_KEY",
    "MAX_ATTEMPTS",
    "MAX_KEY_LENGTH",
    "IdempotencyKeys",
    "SPLIT_ABOVE",
    "ResendPlan",
    "check_key",
]

IDEMPOTENCY_KEY: Final = "idempotency_key"
"""The ``action`` field that carries the key."""

IDEMPOTENCY_CONFLICT: Final = "idempotency_conflict"
"""The connector's ``code`` for a repeated key whose action differs from the first."""

CONTENT_OPS: Final = frozenset(
    {"send", "edit", "delete", "prompt", "follow_up", "send_media", "task_card"}
)
"""The ops whose actions carry a key: what a user would see twice, or miss. A draft is
keyed by its ``draft_id`` already; typing, reactions and the rest are not content."""

MAX_KEY_LENGTH: Final = 64
_KEY: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

MAX_ATTEMPTS: Final = 6
"""Attempts given half the time left at most; from this one on, each waits for the rest
of the deadline (a connection's end still starts the next one)."""

_MIN_SLICE: Final = 0.05
"""Seconds: an attempt is never given less than this (or the rest of the deadline),
so a request close to its deadline is not sent again in a flurry."""


SPLIT_ABOVE: Final = 2 * _MIN_SLICE
"""Seconds: a deadline further than this is split into attempts (nearer, an attempt
gets all of it)."""


def check_key(key: object) -> str:
    """``key`` if it is a valid idempotency key; raises ``ValueError`` (``TypeError``
    for a non-string) saying what a key must be."""
    if not isinstance(key, str):
        raise TypeError(f"idempotency_key must be a string, got {type(key).__name__}")
    if _KEY.fullmatch(key) is None:
        raise ValueError(
            f"idempotency_key must be 1 to {MAX_KEY_LENGTH} characters of A-Z a-z 0-9 "
            f"_ . : - (got {len(key)} characters)"
        )
    return key


class IdempotencyKeys:
    """The relay's own keys: ``tr.<random prefix>.<counter>``, unique in the process
    and across restarts (the prefix is 48 fresh bits a process), and cheap: one
    ``os.urandom`` call per process, a counter formatted per key (0.2 us, where
    a ``secrets.token_hex`` per request would be a system call each)."""

    __slots__ = ("_count", "_prefix")

    def __init__(self, random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        self._prefix = f"tr.{random_bytes(6).hex()}."
        self._count = 0

    def next(self) -> str:
        self._count += 1
        return f"{self._prefix}{self._count:x}"

    def __repr__(self) -> str:
        return "<IdempotencyKeys>"  # keys are not for logs above DEBUG


class ResendPlan:
    """When one keyed request is written, and sent again.

    An attempt is given half of the time left (at least `_MIN_SLICE`, and the whole
    rest on the last of `MAX_ATTEMPTS`): a result lost on a connection that stays up is
    then found missing while time is left to ask again, and the connector, which
    answers a repeat after the first attempt if that is still running, makes the
    early repeat harmless. An attempt ended by its connection is followed by the next
    on the next connection for as long as the deadline allows. ``attempts`` counts the
    writes."""

    __slots__ = ("attempts", "deadline", "tries")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.attempts = 0
        """Attempts written (the connector may have seen them)."""
        self.tries = 0
        """Attempts made, written or not."""

    def attempt_deadline(self, now: float) -> float:
        """The deadline of the attempt made now (counted)."""
        self.tries += 1
        left = self.deadline - now
        if self.tries >= MAX_ATTEMPTS or left <= SPLIT_ABOVE:
            return self.deadline
        return now + left / 2

    def again(self, now: float) -> bool:
        """Whether an attempt that ended without the connector's answer is followed by
        another: while time is left."""
        return now < self.deadline
