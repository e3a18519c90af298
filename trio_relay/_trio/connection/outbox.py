"""What waits to be written on one WebSocket, and how a burst is packed into messages.

A request writes its own frame when the socket takes bytes now (see
``Connection.submit``); everything else — a burst of requests, acks, pings' company,
frames that found the socket busy — is queued here for a writer, which takes
*everything* queued since its last write and packs it into as few WebSocket messages as
the limits allow. Trio pays a fixed cost per message (framing, a ``send_all``, a
scheduler round trip), so under load this batching is what lets many requesters share
one socket cheaply. A sender never blocks on the network: it queues and moves on, and a
stalled socket fills the box (``max_frames``), not our memory.

The reference connector runs `Outbox.run_writer` (text lines, one send per
message). The gateway's connection keeps its lines as UTF-8 ``bytes`` (encoded once,
when the request is made) and runs its own writer over `Outbox.messages`, because
its WebSocket frames messages without I/O and writes a whole batch at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import trio

MAX_BATCH_FRAMES = 32
"""Frames per message at most. Batching amortises the per-message cost, but one huge
message makes the peer wait until all of it is written; several mid-sized ones let it
start on the first while we write the rest. On two cores, against the reference
connector in its own process, 32 gave twice the 256-way throughput of unbounded batches
(36k vs 18k requests/s); see benchmarks/RESULTS.md."""


class Outgoing(Protocol):
    """Something queued for the socket: a wire line, and hooks for its fate."""

    @property
    def line(self) -> str | bytes: ...

    abandoned: bool
    """Set by the sender when it no longer wants the line sent (cancelled, timed out)."""

    def mark_sending(self) -> None:
        """Called right before the message carrying the line is written: from here on
        the peer may get it, even if the write then fails or the sender gives up."""

    def mark_written(self) -> None:
        """Called right after the message carrying the line was handed to the socket."""


class Line:
    """A fire-and-forget frame (hello, ack, interrupt): nobody waits on its fate."""

    __slots__ = ("line",)
    abandoned = False

    def __init__(self, line: str | bytes) -> None:
        self.line = line

    def mark_sending(self) -> None:
        pass

    def mark_written(self) -> None:
        pass


class Outbox:
    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = ("_lot", "_max_frames", "_max_message_bytes", "_on_put", "_on_sent", "_queue")

    def __init__(
        self,
        *,
        max_frames: int,
        max_message_bytes: int,
        on_sent: Callable[[int], None] | None = None,
        on_put: Callable[[], None] | None = None,
    ) -> None:
        """``on_sent(n)`` is called after each message, with the frames it carried;
        ``on_put()`` after each item queued (to start a writer that is not running)."""
        self._on_put = on_put
        self._max_frames = max_frames
        self._on_sent = on_sent
        self._max_message_bytes = max_message_bytes
        self._queue: list[Outgoing] = []
        self._lot: trio.lowlevel.ParkingLot | None = None
        """Made by the first wait: only the reference connector's writer parks here."""

    def put(self, item: Outgoing) -> bool:
        """Queue ``item``; false (nothing queued) when ``max_frames`` are waiting."""
        if len(self._queue) >= self._max_frames:
            return False
        self._queue.append(item)
        if self._lot:
            self._lot.unpark()
        if self._on_put is not None:
            self._on_put()
        return True

    @property
    def has_queued(self) -> bool:
        return bool(self._queue)

    async def wait_queued(self) -> None:
        """Sleep until something is queued (returns at once if something is)."""
        if not self._queue:
            await self._park()

    async def _park(self) -> None:
        if self._lot is None:
            self._lot = trio.lowlevel.ParkingLot()
        await self._lot.park()

    def messages(self, batch: list[Outgoing]) -> Iterator[list[Outgoing]]:
        """Split ``batch`` into messages (see `_message_end`), leaving out what
        its sender abandoned by the time each message is formed."""
        start = 0
        while start < len(batch):
            end = self._message_end(batch, start)
            group = [item for item in batch[start:end] if not item.abandoned]
            start = end
            if group:
                yield group

    def take_unsent(self) -> list[Outgoing]:
        """Everything queued since the last call; empties the box."""
        items, self._queue = self._queue, []
        return items

    async def run_writer(
        self, send: Callable[[str], Awaitable[None]], is_open: Callable[[], bool]
    ) -> None:
        """Write queued lines through ``send`` forever; ends only by exception/cancel.

        Each item is marked *sending* before its message is written and *written*
        after. A failed or cancelled write may still have delivered the message, and a
        sender that gives up mid-write cannot stop it, so from ``mark_sending`` on the
        frame's fate is unknown; before it, the frame certainly never left. Returns
        when ``is_open()`` turns false, without marking what is still queued.
        """
        while True:
            if not self._queue:
                await self._park()
            # If other tasks are ready to run, one scheduler pass lets them add their
            # frames first, so a burst leaves as one message instead of many. Alone,
            # the pass would only add latency (and a system call).
            if trio.lowlevel.current_statistics().tasks_runnable:
                await trio.lowlevel.checkpoint()
            batch = self.take_unsent()
            start = 0
            while start < len(batch):
                if not is_open():
                    return  # nothing of this message can leave: leave it unmarked
                end = self._message_end(batch, start)
                # Filtered again per message: a sender may have given up while an
                # earlier message of this batch was being written.
                group = [item for item in batch[start:end] if not item.abandoned]
                start = end
                if not group:
                    continue
                for item in group:
                    item.mark_sending()
                await send("".join(item.line for item in group))  # type: ignore[misc]
                if self._on_sent is not None:
                    self._on_sent(len(group))
                for item in group:
                    item.mark_written()

    def _message_end(self, batch: list[Outgoing], start: int) -> int:
        """Where the message that starts at ``batch[start]`` ends (exclusive): at most
        ``MAX_BATCH_FRAMES`` lines and ``max_message_bytes`` of UTF-8, at least one line."""
        stop = min(len(batch), start + MAX_BATCH_FRAMES)
        # The common case first, a burst that fits one message with room to spare: one
        # sum, not a Python step per line. A character is at most 4 bytes of UTF-8, so
        # 4x the lengths bounds the size of str lines and bytes lines alike.
        if sum(len(item.line) for item in batch[start:stop]) * 4 <= self._max_message_bytes:
            return stop
        end, size = start, 0
        while end < stop:
            line = batch[end].line
            n = len(line) if isinstance(line, bytes) or line.isascii() else len(line.encode())
            if end > start and size + n > self._max_message_bytes:
                break
            size += n
            end += 1
        return end
