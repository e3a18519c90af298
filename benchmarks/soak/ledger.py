"""What the harness knows about each request: two bytes of flags per nonce.

Every action carries a unique ``nonce``. The connector's handler marks it *received*,
*answered* and, when it answers success, *carried out* (the chat shows it); the
client-side write tap marks it *attempted* (a message carrying its frame was handed to
the socket) and *written* (that write returned); the requester marks how ``request()``
ended. The invariants are statements about these flags.
"""

from __future__ import annotations

import array
import re

__all__ = [
    "AMBIGUOUS",
    "ANSWERED",
    "ATTEMPTED",
    "CARRIED",
    "DEFINITE",
    "FINISHED",
    "RECEIVED",
    "STARTED",
    "SUCCESS",
    "WRITTEN",
    "Flags",
]

STARTED = 1
RECEIVED = 2  # the connector decoded the outbound frame
ANSWERED = 4  # the connector produced a result for it
WRITTEN = 8  # the client's write of the message carrying it returned
FINISHED = 16  # request() returned
DEFINITE = 32  # ... with a gateway-made definite failure
AMBIGUOUS = 64  # ... with an ambiguous failure
SUCCESS = 128  # ... with success
ATTEMPTED = 256  # the client's write of a message carrying it began
CARRIED = 512  # the connector carried it out (the chat shows it)

_NONCE = re.compile(rb'"nonce":(\d+)(?=\D)')
"""A nonce whose digits are all there (only actions carry one)."""


class Flags:
    """Two bytes of flags per nonce, grown in chunks."""

    def __init__(self) -> None:
        self.data = array.array("H", bytes(1 << 17))
        self.count = 0

    def new(self) -> int:
        nonce = self.count
        self.count += 1
        if nonce >= len(self.data):
            self.data.extend(array.array("H", bytes(2 * len(self.data))))
        self.data[nonce] = STARTED
        return nonce

    def set(self, nonce: int, flag: int) -> None:
        if 0 <= nonce < self.count:
            self.data[nonce] |= flag

    def has(self, nonce: int, flag: int) -> bool:
        return bool(self.data[nonce] & flag)

    def mark_sent(self, data: bytes | bytearray | memoryview | str, flag: int) -> None:
        """Set ``flag`` on every nonce in ``data`` (text the client handed to its socket)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        for match in _NONCE.finditer(raw):
            self.set(int(match.group(1)), flag)
