"""The send side of a :class:`~trio_relay._trio.connection.connection.Connection`: the writer task,
started on demand, and what a failed write means.

A request writes its own frame when the socket is idle (see ``Connection.request``);
everything else is queued in the outbox, and the writer packs a burst into few messages
and one write, then ends when the box is empty again.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import trio

from ..._core.config import RelayConfig
from ..._core.stats import RelayStats
from ..link.websocket import WebSocket, WriteFailed
from .outbox import Outbox, Outgoing
from .waiters import Expiry

logger = logging.getLogger("trio_relay")

_current_statistics = trio.lowlevel.current_statistics

FLUSH_BYTES = 1 << 16
"""The writer writes once this much is framed, instead of framing a whole burst first."""


class SendSide:
    ws: WebSocket
    outbox: Outbox
    _nursery: trio.Nursery
    _config: RelayConfig
    _stats: RelayStats
    _expiry: Expiry
    _writer_running: bool
    burst: bool
    _write_failed_at: float | None

    if TYPE_CHECKING:  # defined by Connection

        @property
        def is_open(self) -> bool: ...

        def end(
            self,
            cause: str,
            code: int | None = None,
            reason: str | None = None,
            *,
            by_us: bool = False,
        ) -> None: ...

    def _send_now(self, payload: bytes, frames: int) -> None:
        """Frame ``payload`` (``frames`` lines) as one message and hand the socket what
        it takes now, never waiting (plain TCP only: ``ws.can_send_now``); the rest is
        the writer's. A failed write is taken as any other (see :meth:`_write_failed`)."""
        ws = self.ws
        ws.send_text(payload)
        self._count_sent(frames)
        try:
            if not ws.write_now():
                self._start_writer()
        except WriteFailed as exc:
            self._write_failed(exc)

    def _start_writer(self) -> None:
        if not self._writer_running and self.is_open:
            self._writer_running = True
            self._nursery.start_soon(self._writer)

    async def _writer(self) -> None:
        """Write what is queued, in as few messages and writes as the limits allow;
        end when nothing is left (the next frame that cannot go directly restarts it)."""
        outbox, ws, stats = self.outbox, self.ws, self._stats
        stats.tasks += 1  # (counted here: no wrapper coroutine per writer start)
        stats.connection_tasks += 1
        try:
            while True:
                # Another task's write (a request's direct write, the reader's answer
                # to a close) goes first. Frames stay in the outbox meanwhile, so a
                # stalled socket fills the outbox (max_queued_frames), not our memory,
                # and a frame whose sender gives up meanwhile never leaves.
                await ws.wait_write_done()
                # If other tasks are ready to run, one scheduler pass lets them add
                # their frames first, so a burst leaves in one write instead of many.
                if _current_statistics().tasks_runnable:
                    await trio.lowlevel.checkpoint()
                self.burst = False
                batch = outbox.take_unsent()
                sent: list[Outgoing] = []
                framed = 0
                for group in outbox.messages(batch):
                    if not ws.can_send:
                        break  # nothing of it can leave: leave it unmarked
                    for item in group:
                        item.mark_sending()
                    lines = [item.line for item in group]
                    payload = lines[0] if len(lines) == 1 else b"".join(lines)  # type: ignore[arg-type]
                    ws.send_text(payload)  # type: ignore[arg-type]
                    self._count_sent(len(group))
                    sent += group
                    framed += len(payload)
                    if framed >= FLUSH_BYTES:
                        # Write as we go: what is not framed yet has certainly not
                        # left (definite if the link dies now), and the senders of
                        # what is still queued may yet give up.
                        if not await self._flush(sent):
                            return
                        sent, framed = [], 0
                if ws.writing or ws.broken or not ws.has_pending:
                    # Nothing to write, or another task is writing (the reader's answer
                    # to a close): it writes what we framed.
                    for item in sent:
                        item.mark_written()
                    if not outbox.has_queued:
                        return
                    continue
                if not await self._flush(sent):
                    return
        finally:
            self._writer_running = False
            stats.tasks -= 1
            stats.connection_tasks -= 1

    async def _flush(self, sent: list[Outgoing]) -> bool:
        try:
            await self.ws.flush()
        except WriteFailed as exc:
            self._write_failed(exc)
            return False
        for item in sent:
            item.mark_written()
        return True

    async def _flush_quietly(self) -> None:
        with contextlib.suppress(WriteFailed):
            await self.ws.flush()

    def _write_failed(self, exc: WriteFailed) -> None:
        # The reader usually sees the same failure once it has handed over everything
        # received before it (answers among them) and ends the connection then; the
        # timer ends it ``close_timeout`` later if it does not.
        logger.info("relay write failed: %s", exc)
        if self._write_failed_at is None:
            self._write_failed_at = trio.current_time()
            self._expiry.wake_by(self._write_failed_at + self._config.close_timeout)

    def _count_sent(self, frames: int) -> None:
        self._stats.messages_sent += 1
        self._stats.frames_sent += frames
