"""Request ids the connector cannot predict.

A result settles the request with its ``requestId``; if a peer could guess the next id
it could answer a request before it exists (docs/protocol.md, "Frames"). So
every id is 64 fresh bits from the OS's CSPRNG — not a random prefix plus a counter,
which a peer learns from the first id it sees. The bytes are fetched in batches (one
system call per 512 ids), which makes an id cheaper than a counter formatted to hex
and hashed. Sans-I/O.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .random_pool import RandomPool

ID_BYTES = 8
"""64 bits: 16 hex characters on the wire."""
BATCH = 512


class RequestIds:
    __slots__ = ("_pool",)

    def __init__(self, random_bytes: Callable[[int], bytes] = os.urandom) -> None:
        """``random_bytes(n)``: the random source (``os.urandom``; tests may pass a
        seeded one)."""
        self._pool = RandomPool(ID_BYTES, BATCH, random_bytes)

    def next(self) -> str:
        return self._pool.next().hex()

    def __repr__(self) -> str:
        return "<RequestIds>"  # never the pool
