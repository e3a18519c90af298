"""Request ids the connector cannot predict.

A result settles the request with its ``requestId``; if a peer could guess the next id
it could answer a request before it exists (docs/protocol.md, "Frames"; issue 12). So
every id is 64 fresh bits from the OS's CSPRNG — not a random prefix plus a counter,
which a peer learns from the first id it sees. The bytes are fetched in batches (one
system call per 512 ids), which makes an id cheaper than a counter formatted to hex
and hashed. Sans-I/O.
"""

from __future__ import annotations

import os
from collections.abc import Callable

ID_BYTES = 8
"""64 bits: 16 hex characters on the wire."""
BATCH = 512


class RequestIds:
    __slots__ = ("_at", "_pool", "_random")

    def __init__(self, random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        """``random_bytes(n)``: the random source (``os.urandom``; tests may pass a
        seeded one)."""
        self._random = random_bytes
        self._pool = b""
        self._at = 0

    def next(self) -> str:
        at = self._at
        if at >= len(self._pool):
            self._pool = self._random(ID_BYTES * BATCH)
            at = 0
        self._at = at + ID_BYTES
        return self._pool[at : at + ID_BYTES].hex()

    def __repr__(self) -> str:
        return "<RequestIds>"  # never the pool
