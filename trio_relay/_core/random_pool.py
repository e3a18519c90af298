"""Pieces of the operating system's CSPRNG output, fetched a block at a time.

Request ids and WebSocket masking keys must both be unpredictable to the peer
(docs/protocol.md, "Frames"; RFC 6455 §5.3), and both are needed once per frame: one
``os.urandom`` call per block instead of per piece keeps a system call off every
request. Sans-I/O: the random source is passed in (tests give a seeded one).
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["RandomPool"]


class RandomPool:
    """``next()``: the next ``piece`` bytes; a new block of ``piece * pieces`` bytes is
    drawn from ``random_bytes`` when the last one is used up."""

    __slots__ = ("_at", "_block", "_block_size", "_piece", "_random")

    def __init__(
        self, piece: int, pieces: int, random_bytes: Callable[[int], bytes] = os.urandom
    ) -> None:
        self._random = random_bytes
        self._piece = piece
        self._block_size = piece * pieces
        self._block = b""
        self._at = 0

    def next(self) -> bytes:
        at = self._at
        if at >= len(self._block):
            self._block = self._random(self._block_size)
            at = 0
        self._at = at + self._piece
        return self._block[at : at + self._piece]

    def forget(self) -> None:
        """Drop the unused bytes (a forked child must not reuse its parent's)."""
        self._block = b""
        self._at = 0

    def __repr__(self) -> str:
        return f"<RandomPool of {self._piece}-byte pieces>"  # never the bytes
