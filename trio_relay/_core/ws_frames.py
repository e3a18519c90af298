"""The WebSocket frames on a relay's hot path, cut and built in plain Python beside the
full protocol object (RFC 6455 §5.2).

The shell's full sans-I/O protocol (``websockets``' ``ClientProtocol``) owns the upgrade,
control frames, fragmented messages, the close handshake and every error. For the frames
a relay exchanges thousands of times a second — one complete, unmasked text message from
the server, one masked text message from us — its generic path costs, measured on this
machine, 5 µs to parse one and 3.6 µs to frame one: about a fifth of a request's whole
client CPU at 16-way, for what is a header and a slice. So:

- `InboundFrames` cuts the bytes read from the socket at frame boundaries. The
  payload of each complete *plain* data frame (final, no reserved bits, unmasked, within
  the size limit) is taken here; any other frame is handed to the protocol whole, so the
  protocol only ever sees complete frames and its parser always stands at a frame
  boundary. A header the protocol must reject at once (masked, reserved bits, an unknown
  opcode, a payload over the limit) switches to *passthrough*: from there on every byte
  goes to the protocol, which fails the connection with the close code it always would.
- A text message must be valid UTF-8 (RFC 6455 §8.1), and the protocol object does not
  check it (the asyncio layer of ``websockets`` does, when it decodes): so a plain text
  frame's payload is checked here, and one that is not UTF-8 raises `InvalidText`
  for the shell to fail the connection with 1007. The check is ``bytes.isascii()`` (no
  copy, no allocation), and a real decode only for a payload with a byte past 0x7F.
  Fragmented text goes through the protocol whole; `TextValidator` checks it
  fragment by fragment in the shell.
- `text_frame` builds a masked text frame; the masking function and the keys are
  the shell's (the keys from a `RandomPool`).

Nothing here decides when the fast path applies: the shell asks for plain frames only
while the protocol is open and not inside a fragmented message, and frames its own text
only while no extension (permessage-deflate) is negotiated.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

__all__ = ["INVALID_DATA", "InboundFrames", "InvalidText", "TextValidator", "text_frame"]

INVALID_DATA = 1007
"""RFC 6455's close code for a text message that is not UTF-8 (§7.4.1)."""

_FIN = 0x80
_RESERVED = 0x70
_MASKED = 0x80
_TEXT_FINAL = _FIN | 0x1
_BINARY_FINAL = _FIN | 0x2
_PLAIN_DATA = (_TEXT_FINAL, _BINARY_FINAL)
_VALID_OPCODES = frozenset((0x0, 0x1, 0x2, 0x8, 0x9, 0xA))
_CONTROL = 0x8
_MAX_CONTROL_PAYLOAD = 125


class InvalidText(Exception):
    """A text message's payload is not valid UTF-8: the connection must fail with
    `INVALID_DATA`. The message says where (for the close reason and the log)."""

    def __init__(self, error: UnicodeDecodeError) -> None:
        super().__init__(f"text message is not valid UTF-8: {error.reason} at byte {error.start}")


def check_text(payload: bytes) -> None:
    """Raise `InvalidText` unless ``payload`` is valid UTF-8."""
    if not payload.isascii():
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidText(exc) from None


class TextValidator:
    """Checks one text message's fragments as they arrive (a character may be split
    across two of them): `start` at its first frame, `feed` for each."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder: codecs.IncrementalDecoder | None = None

    def start(self, data: bytes, *, final: bool) -> None:
        """A text message's first frame (``final``: and its only one)."""
        if final:
            self._decoder = None
            check_text(data)
            return
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.feed(data, final=False)

    def stop(self) -> None:
        """A binary message began: its continuation frames are not text."""
        self._decoder = None

    def feed(self, data: bytes, *, final: bool) -> None:
        """A continuation frame (of a binary message when no text message is open)."""
        decoder = self._decoder
        if decoder is None:
            return
        if final:
            self._decoder = None
        try:
            decoder.decode(data, final)
        except UnicodeDecodeError as exc:
            self._decoder = None
            raise InvalidText(exc) from None


class InboundFrames:
    """The server's bytes, split at frame boundaries (see the module docstring)."""

    __slots__ = ("_buffer", "_max_size", "passthrough")

    def __init__(
        self, max_size: int, pending: bytes | bytearray = b"", *, passthrough: bool = False
    ) -> None:
        self._buffer: bytes | bytearray = pending
        self._max_size = max_size
        self.passthrough = passthrough
        """Every byte goes to the protocol: set here on a header it must reject, and by
        the shell from the start when an extension (permessage-deflate) is in use."""

    @property
    def buffered(self) -> int:
        """Bytes held back: the start of a frame not complete yet."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray) -> None:
        buffer = self._buffer
        if not buffer:
            self._buffer = data
        elif isinstance(buffer, bytearray):
            buffer += data  # a long message arriving read by read: no quadratic copying
        else:
            grown = bytearray(buffer)
            grown += data
            self._buffer = grown

    def take(self, payloads: list[bytes], *, plain: bool) -> bytes | None:
        """Append the payload of each plain data frame at the head of the buffer to
        ``payloads`` (only if ``plain``: otherwise every frame is the protocol's); stop at
        the first frame that is not one and return its bytes, for the protocol — or, in
        passthrough, everything buffered. None: what is left is an incomplete frame.

        Raises `InvalidText` for a plain text frame that is not UTF-8, after the
        payloads before it were appended; everything after it then goes to the protocol
        (which the shell has failed by then).
        """
        buffer = self._buffer
        if self.passthrough:
            self._buffer = b""
            return bytes(buffer) if buffer else None
        size = len(buffer)
        pos = 0
        while size - pos >= 2:
            first, second = buffer[pos], buffer[pos + 1]
            length = second & 0x7F
            head = 2
            if length == 126:
                if size - pos < 4:
                    break
                length = (buffer[pos + 2] << 8) | buffer[pos + 3]
                head = 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(buffer[pos + 2 : pos + 10], "big")
                head = 10
            opcode = first & 0x0F
            if (
                second & _MASKED
                or first & _RESERVED
                or opcode not in _VALID_OPCODES
                or length > self._max_size
                or (opcode & _CONTROL and (length > _MAX_CONTROL_PAYLOAD or not first & _FIN))
            ):
                # The protocol rejects this header as soon as it sees it: let it.
                self.passthrough = True
                rest, self._buffer = buffer[pos:], b""
                return bytes(rest)
            end = pos + head + length
            if end > size:
                break
            if plain and first in _PLAIN_DATA:
                payload = bytes(buffer[pos + head : end])
                if first == _TEXT_FINAL and not payload.isascii():
                    try:
                        payload.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        self.passthrough = True
                        self._buffer = buffer[end:]
                        raise InvalidText(exc) from None
                payloads.append(payload)
                pos = end
                continue
            frame, self._buffer = buffer[pos:end], buffer[end:]
            return bytes(frame)
        if pos:
            self._buffer = buffer[pos:]
        return None

    def drain(self) -> bytes:
        """Everything held back (at the end of the stream, for the protocol to judge)."""
        rest, self._buffer = self._buffer, b""
        return bytes(rest)


def text_frame(payload: bytes, key: bytes, apply_mask: Callable[[bytes, bytes], bytes]) -> bytes:
    """One final, masked text frame carrying ``payload`` (RFC 6455 §5.2)."""
    length = len(payload)
    if length < 126:
        head = bytes((_TEXT_FINAL, _MASKED | length))
    elif length < 1 << 16:
        head = bytes((_TEXT_FINAL, _MASKED | 126)) + length.to_bytes(2, "big")
    else:
        head = bytes((_TEXT_FINAL, _MASKED | 127)) + length.to_bytes(8, "big")
    return head + key + apply_mask(payload, key)
