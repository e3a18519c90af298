"""Streaming replies: :meth:`Relay.stream_reply` (``typing``, ``send``, throttled
``edit``s; docs/protocol.md, op table).

While a reply is being written, the user sees a typing indicator until the first text,
repeated within the platform's typing lifetime. The first text is sent at once; as it
grows the message is edited, at most every ``edit_interval`` seconds, so a fast model
does not hit the platform's rate limits. A message that reaches ``max_message_length``
is finalised (cut where :func:`~trio_relay._core.text.first_piece` says) and the text
continues in a new message. On exit a final edit shows the whole text. A platform
without ``edit`` gets one message per finished piece instead, with typing shown until
the last one is out.

Failures, and why they are handled so:

- An **ambiguous edit** is retried once: an edit sets the whole content, so applying it
  twice is harmless.
- An **ambiguous send** is never retried: the message may be on screen already, and a
  retry would post it twice. Its text is left as it is (no id, so no edits); text
  written after it goes to a new message.
- A **definite send failure** (nothing left) is retried at the next flush, unless the
  connector itself refused (``success: false``, e.g. egress declined): then the reply
  stops sending and :attr:`StreamReply.failed` says why.

One task (the pump) does every send and edit, in order; a second one shows typing.
Both live in the block's nursery, so nothing outlives ``async with``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from ..._core import outcome as _outcome
from ..._core.descriptor import Descriptor
from ..._core.outcome import Outcome
from ..._core.pacing import typing_interval
from ..._core.text import first_piece, text_length

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["StreamReply", "open_stream_reply"]

logger = logging.getLogger("trio_relay")

# Gateway-side definite failures: nothing reached the connector, so a later try is safe.
_RETRYABLE = frozenset(
    {
        _outcome.NOT_CONNECTED,
        _outcome.WRITE_FAILED,
        _outcome.QUEUE_FULL,
        _outcome.TIMEOUT,
        _outcome.CLOSING,
    }
)


class StreamReply:
    """One reply being streamed into a chat; get it from :meth:`Relay.stream_reply`.

    After the block, ``message_ids`` holds the ids of the messages the reply used, in
    order (a message whose send was ambiguous has none), ``outcomes`` every send and
    edit outcome in order, ``text`` everything written, and ``failed`` the outcome that
    stopped the reply, if one did.
    """

    def __init__(
        self,
        relay: RelayPort,
        chat_id: str,
        descriptor: Descriptor | None,
        *,
        reply_to: str | None,
        edit_interval: float,
    ) -> None:
        self._relay = relay
        self.chat_id = chat_id
        self._reply_to = reply_to
        self._limit = descriptor.max_message_length if descriptor else 4096
        self._len_unit = descriptor.len_unit if descriptor else "chars"
        self._edits = descriptor is None or (
            descriptor.supports_edit and descriptor.supports("edit")
        )
        self._typing = descriptor is None or descriptor.supports("typing")
        self._typing_interval = typing_interval(descriptor)
        self._edit_interval = edit_interval
        self.message_ids: list[str] = []
        self.outcomes: list[Outcome] = []
        self.failed: Outcome | None = None
        self._written: list[str] = []
        self._segment = ""  # the text of the message being built (not yet final)
        self._message_id: str | None = None  # that message, once sent
        self._shown = ""  # what it shows now
        self._last_edit = -math.inf
        self._changed = trio.Event()
        self._closing = False
        self._aborted = False  # the block raised or was cancelled: send nothing more
        self._typing_off = trio.Event()

    @property
    def text(self) -> str:
        """Everything written so far."""
        return "".join(self._written)

    async def write(self, chunk: str) -> None:
        """Add ``chunk`` to the reply. Returns at once: sends and edits happen in the
        background, throttled; a checkpoint either way."""
        if not isinstance(chunk, str):
            raise TypeError(f"write() takes str, got {type(chunk).__name__}")
        if self._closing:
            raise RuntimeError("the stream_reply block has ended; write inside it")
        if chunk:
            self._written.append(chunk)
            self._segment += chunk
            self._changed.set()
        await trio.lowlevel.checkpoint()

    # --- the tasks -------------------------------------------------------------------

    async def _show_typing(self) -> None:
        # Until text is visible (edit mode) or the reply is done (one message per piece,
        # so the user waits for whole pieces).
        while not self._typing_off.is_set():
            await self._relay.request({"op": "typing", "chat_id": self.chat_id})
            with trio.move_on_after(self._typing_interval):
                await self._typing_off.wait()

    async def _pump(self) -> None:
        while not self._closing:
            await self._changed.wait()
            self._changed = trio.Event()
            if self._edits and self._message_id is not None:
                # Throttle edits; a close cuts the wait short (the final edit is due).
                with trio.move_on_at(self._last_edit + self._edit_interval):
                    while not self._closing:
                        await self._changed.wait()
                        self._changed = trio.Event()
            if not self._closing:
                await self._flush(final=False)
        # Text written while the last flush was out is covered here.
        await self._flush(final=True)

    async def _flush(self, *, final: bool) -> None:
        # Checked here, not left to the cancellation: a request queues its frame
        # before its first checkpoint, so a cancelled pump could still send one.
        if self.failed is not None or self._aborted:
            return
        # Finish every piece that no longer fits; text may grow while we await.
        while self._units(self._segment.strip()) > self._limit:
            snapshot = self._segment
            # lstrip only: trailing whitespace may separate it from the next chunk.
            piece, rest = first_piece(snapshot.lstrip(), self._limit, self._len_unit)
            if not await self._finish_piece(piece):
                return
            self._segment = rest + self._segment[len(snapshot) :]
        content = self._segment.strip()
        if not content:
            return
        if self._edits:
            if self._message_id is None and not self._shown:
                await self._send(content, len(self._segment))
            elif self._message_id is not None and content != self._shown:
                await self._edit(content)
        elif final:
            await self._send(content, len(self._segment))

    async def _finish_piece(self, piece: str) -> bool:
        """Send or edit the current message to its final ``piece``; the next text
        starts a new message. False when the reply must stop."""
        if self._edits and self._message_id is not None:
            if piece != self._shown:
                await self._edit(piece)
        elif not await self._send(piece, None):
            return False
        self._message_id, self._shown = None, ""
        return self.failed is None

    async def _send(self, content: str, consumed: int | None) -> bool:
        """Send ``content`` as a new message; ``consumed`` is how much of the segment
        it covers (``None``: a finished piece, the caller moves on). False if nothing
        was sent and the reply should not go on now."""
        action: dict[str, Any] = {"op": "send", "chat_id": self.chat_id, "content": content}
        if self._reply_to is not None and not self.outcomes:
            action["reply_to"] = self._reply_to
        if self._aborted:
            return False
        outcome = await self._relay.request(action, wait_connected=True)
        self.outcomes.append(outcome)
        if outcome.success:
            message_id = outcome.result.get("message_id")
            self._message_id = str(message_id) if message_id is not None else None
            if self._message_id is not None:
                self.message_ids.append(self._message_id)
            self._shown = content
            self._last_edit = trio.current_time()
            self._text_visible()
            if self._message_id is None and consumed is not None:
                # Sent, but without an id it cannot be edited: what follows is new.
                self._segment = self._segment[consumed:]
                self._shown = ""
            return True
        if outcome.ambiguous:
            # Maybe on screen already: never sent again. What follows is a new message.
            logger.warning(
                "stream_reply to %s: a send was ambiguous (%s)", self.chat_id, outcome.error,
                extra={"relay": self._relay.name, "cause": outcome.code},
            )
            self._text_visible()
            if consumed is not None:
                self._segment = self._segment[consumed:]
            self._message_id, self._shown = None, ""
            return True
        if outcome.code not in _RETRYABLE:
            self.failed = outcome
            self._typing_off.set()  # nothing more will show
            logger.warning("stream_reply to %s stopped: %s", self.chat_id, outcome.error,
                           extra={"relay": self._relay.name, "cause": outcome.code})
        return False

    def _text_visible(self) -> None:
        # With edits the user now watches the text grow; without, they wait for whole
        # pieces, so typing goes on until the block ends.
        if self._edits:
            self._typing_off.set()

    async def _edit(self, content: str) -> None:
        assert self._message_id is not None
        action = {
            "op": "edit",
            "chat_id": self.chat_id,
            "message_id": self._message_id,
            "content": content,
        }
        if self._aborted:
            return
        outcome = await self._relay.request(action)
        if outcome.ambiguous and not self._aborted:
            # An edit sets the whole content: a second one is harmless.
            self.outcomes.append(outcome)
            outcome = await self._relay.request(action)
        self.outcomes.append(outcome)
        self._last_edit = trio.current_time()
        if outcome.success:
            self._shown = content
        else:
            logger.warning("stream_reply to %s: an edit failed (%s)", self.chat_id, outcome.error,
                           extra={"relay": self._relay.name, "cause": outcome.code})

    def _units(self, text: str) -> int:
        return text_length(text, self._len_unit)


@asynccontextmanager
async def open_stream_reply(
    relay: RelayPort, chat_id: str, *, reply_to: str | None, edit_interval: float
) -> AsyncIterator[StreamReply]:
    """See :meth:`Relay.stream_reply`."""
    reply = StreamReply(
        relay,
        chat_id,
        relay.descriptor_for(chat_id),
        reply_to=reply_to,
        edit_interval=edit_interval,
    )
    raised: BaseException | None = None
    async with trio.open_nursery() as nursery:
        if reply._typing:
            nursery.start_soon(reply._show_typing)
        pump_done = trio.Event()

        async def pump() -> None:
            try:
                await reply._pump()
            finally:
                pump_done.set()

        nursery.start_soon(pump)
        try:
            yield reply
        except BaseException as exc:
            # Cancelled, or the block failed: send nothing more. Kept aside and raised
            # below, outside the nursery, so it comes out as itself, not in a group.
            raised = exc
            reply._aborted = True
        else:
            reply._closing = True
            reply._changed.set()
            await pump_done.wait()
        finally:
            reply._closing = True
            nursery.cancel_scope.cancel()
    if raised is not None:
        raise raised
