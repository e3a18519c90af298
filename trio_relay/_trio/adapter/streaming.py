"""Streaming replies: [`Relay.stream_reply`][trio_relay.Relay.stream_reply] (``typing``, ``send``,
throttled
``edit``s; or ``draft`` frames, a live card; docs/protocol.md, op table and "Live
cards").

While a reply is being written, the user sees a typing indicator until the first text,
repeated within the platform's typing lifetime. The first text is sent at once; as it
grows the message is edited, at most every ``edit_interval`` seconds, so a fast model
does not hit the platform's rate limits. A message that reaches ``max_message_length``
is finalised (cut where `first_piece` says) and the text
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
  stops sending and [`StreamReply.failed`][trio_relay.StreamReply.failed] says why.

**Live cards.** Where the chat's descriptor has ``supports_draft_streaming`` and lists
``draft`` ([`Descriptor.live_cards`][trio_relay.Descriptor.live_cards]), the reply streams as
``draft`` frames
instead, each with the whole text so far, at most every ``edit_interval``, under one
``draft_id``. Where the stream is the message
([`Descriptor.stream_is_message`][trio_relay.Descriptor.stream_is_message])
the block ends with a seal (``final: true``); elsewhere the draft is a preview and the
block ends with an ordinary ``send``. Why each failure is handled so:

- A **lost seal** (its outcome ambiguous: the result never came, or the connection
  ended after it left) is sent again, at once and then after 0.05 s, 0.1 s, ... until a
  definite answer, for at most ``close_timeout`` after the first loss: the connector
  answers a repeated seal with the same message (a tombstone per sealed ``draft_id``),
  so a repeat costs nothing and never posts twice. If the budget runs out, the reply's
  outcome stays ambiguous and nothing else is sent (a plain ``send`` then could show
  the text twice). Only a *definite* refusal of the seal sends the rest of the text as
  ordinary messages.
- An **ambiguous draft** needs nothing: the next one carries the whole text anyway.
- A **definite rejection** of a draft (the connector said no) means the lane is
  unusable for this reply: no further draft frame, not even a seal. The rest goes out
  by send and edits, starting after what the stream already shows (the last draft the
  connector accepted), so no text is lost or shown twice; the platform seals the
  stream itself.
- An **egress decline** (of a draft, the seal, a send) stops the reply: it is never
  retried as another op (and the relay latches the chat).
- A block that **raises or is cancelled** seals what is already on screen (the last
  accepted draft), best effort, within ``close_timeout``, then the error goes on.

One task (the pump) does every send, edit, draft and seal, in order; a second one shows
typing. Both live in the block's nursery, so nothing outlives ``async with``; only the
seal of a failed block runs after it, shielded and bounded.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from ..._core import outcome as _outcome
from ..._core.descriptor import Descriptor
from ..._core.outcome import Outcome
from ..._core.pacing import typing_interval
from ..._core.text import first_piece, split_text, text_length
from .sending import send_pieces, with_format_hints

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

# A lost seal is sent again until a definite answer, for at most close_timeout after the
# first loss (nothing was sent yet in these cases, or the seal may have been lost):
# closing and revocation end the reply instead.
_SEAL_AGAIN = _RETRYABLE - {_outcome.CLOSING}
SEAL_RETRY_DELAY = 0.05
"""The wait before the second repeat of a lost seal (the first goes at once); doubles."""

# One draft_id per reply, unique in the process: the connector keys its streams (and
# the tombstones of sealed ones) by it, across every relay of the process.
_draft_ids = itertools.count(1)


class StreamReply:
    """One reply being streamed into a chat; get it from
    [`Relay.stream_reply`][trio_relay.Relay.stream_reply].

    After the block, ``message_ids`` holds the ids of the messages the reply used, in
    order (a message whose send was ambiguous has none), ``outcomes`` every send, edit,
    draft and seal outcome in order, ``outcome`` the outcome of the reply's final send
    or seal, ``text`` everything written, and ``failed`` the outcome that stopped the
    reply, if one did. ``draft_id`` is the live card's id where the reply streams as
    ``draft`` frames (``None`` otherwise); ``live`` says whether it still does (false
    after a rejected draft made it fall back to send and edits).
    """

    def __init__(
        self,
        relay: RelayPort,
        chat_id: str,
        descriptor: Descriptor | None,
        *,
        reply_to: str | None,
        edit_interval: float,
        format_hints: Mapping[str, Any] | None = None,
        close_timeout: float = 1.0,
    ) -> None:
        self._relay = relay
        self.chat_id = chat_id
        self._reply_to = reply_to
        self._hints = format_hints
        self._close_timeout = close_timeout
        self.live = descriptor is not None and descriptor.live_cards
        self._stream_is_message = descriptor is not None and descriptor.stream_is_message
        self.draft_id: int | None = next(_draft_ids) if self.live else None
        self.outcome: Outcome | None = None
        self._on_screen = ""  # the last draft the connector accepted
        self._on_screen_upto = 0  # how much of the text it covers
        self._drafted: str | None = None  # the last draft that may have reached it
        self._last_draft = -math.inf
        self._sealed = False
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
        self._last_flush = trio.CancelScope(shield=True)
        """Where the pump's last flush runs: a cancellation of the block while it is out
        (a stop during the seal) lets it finish, by the deadline set then."""

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
            if self.live:
                throttle_until = self._last_draft + self._edit_interval
            elif self._edits and self._message_id is not None:
                throttle_until = self._last_edit + self._edit_interval
            else:
                throttle_until = -math.inf
            # Throttle drafts and edits; a close cuts the wait short (the last is due).
            with trio.move_on_at(throttle_until):
                while not self._closing:
                    await self._changed.wait()
                    self._changed = trio.Event()
            if not self._closing:
                await self._flush(final=False)
        # Text written while the last flush was out is covered here.
        with self._last_flush:
            await self._flush(final=True)

    async def _flush(self, *, final: bool) -> None:
        if self.failed is not None or self._aborted:
            return
        if self.live:
            if final:
                await self._finish_live()
            else:
                await self._draft()
            if self.live:
                return
            # A draft was refused: the lane is gone, send and edits take the rest now.
        await self._flush_edits(final=final)

    # --- live cards ------------------------------------------------------------------

    def _draft_action(self, content: str, *, final: bool) -> dict[str, Any]:
        action: dict[str, Any] = {
            "op": "draft",
            "chat_id": self.chat_id,
            "draft_id": self.draft_id,
            "content": content,
            "final": final,
        }
        return with_format_hints(action, self._hints)

    async def _draft(self) -> None:
        """Show the whole text so far as a draft (unless it already shows)."""
        upto = len(self._segment)
        content = self._segment.strip()
        if not content or content == self._drafted:
            return
        if self._units(content) > self._limit:
            await self._fall_back("the reply outgrew max_message_length", seal_shown=True)
            return
        outcome = await self._relay.request(self._draft_action(content, final=False))
        self.outcomes.append(outcome)
        self._last_draft = trio.current_time()
        if outcome.success:
            self._drafted = self._on_screen = content
            self._on_screen_upto = upto
            self._text_visible()
        elif outcome.ambiguous:
            # It may show; the next draft carries the whole text either way.
            self._drafted = content
        elif outcome.egress_declined:
            self._stop_declined(outcome)
        elif outcome.code not in _RETRYABLE:
            # The lane is unusable for this reply: not even a seal goes on it.
            await self._fall_back(f"a draft was refused ({outcome.error})", seal_shown=False)
        # A gateway-side failure sent nothing: the next flush tries again.

    def _stop_declined(self, outcome: Outcome) -> None:
        """The connector declined egress to the chat: the reply sends nothing more (a
        decline is never retried as another op)."""
        self.live = False
        self.failed = outcome
        self._typing_off.set()
        logger.warning("stream_reply to %s stopped: %s", self.chat_id, outcome.error,
                       extra={"relay": self._relay.name, "cause": outcome.code})

    async def _fall_back(self, why: str, *, seal_shown: bool) -> None:
        """The live card cannot carry the reply (the connector refused a draft, or the
        text no longer fits one message): go on with send and edits, starting after
        what the stream already shows (sealed first where it is the message, unless
        ``seal_shown`` is false: after a refusal, no draft frame goes on that lane)."""
        logger.log(
            logging.INFO if why.startswith("the reply outgrew") else logging.WARNING,
            "stream_reply to %s: %s; going on with send and edits",
            self.chat_id,
            why,
        )
        self.live = False
        start = 0
        if self._stream_is_message and self._on_screen:
            # That text stays on screen as a message (sealed by the platform itself if
            # our seal fails): the new message starts after it.
            start = self._on_screen_upto
            if seal_shown:
                await self._seal(self._on_screen)
        self._segment = self._segment[start:]
        self._message_id, self._shown = None, ""

    async def _finish_live(self) -> None:
        content = self._segment.strip()
        if not self._stream_is_message:
            # A preview clears by itself: the reply is an ordinary message.
            if content:
                self._typing_off.set()
                await self._send_final(content)
            return
        if not content:
            return
        if self._units(content) > self._limit:
            # Sealed as far as it showed; the rest in new messages that fit.
            await self._fall_back("the reply outgrew max_message_length", seal_shown=True)
            return
        outcome = await self._seal(content)
        if outcome.success or outcome.ambiguous:
            return
        if outcome.egress_declined:
            self._stop_declined(outcome)
            return
        if outcome.code in _RETRYABLE:
            self.failed = outcome
            logger.warning("stream_reply to %s: the seal failed (%s)", self.chat_id, outcome.error)
            return
        # Refused: what the stream shows stays (the platform seals it); the rest goes
        # out as new messages.
        await self._fall_back(f"the seal was refused ({outcome.error})", seal_shown=False)

    async def _send_final(self, content: str) -> None:
        # Split as send_text does; it stops at the first piece that fails.
        outcomes = await send_pieces(
            self._relay,
            self.chat_id,
            split_text(content, self._limit, self._len_unit),
            reply_to=self._reply_to,
            format_hints=self._hints,
            wait_connected=True,
        )
        self.outcomes.extend(outcomes)
        for outcome in outcomes:
            message_id = outcome.result.get("message_id") if outcome.success else None
            if message_id is not None:
                self.message_ids.append(str(message_id))
        if outcomes:
            self.outcome = outcomes[-1]
            if not self.outcome.success and not self.outcome.ambiguous:
                self.failed = self.outcome

    # ASYNC109: the seal is a request: its timeout= ends in an Outcome.
    async def _seal(self, content: str, *, timeout: float | None = None) -> Outcome:  # noqa: ASYNC109
        """Seal the live card with ``content``: the message it ends as. A lost seal is
        sent again until a definite answer, within ``close_timeout`` (see the module
        docstring: a repeated seal is idempotent)."""
        action = self._draft_action(content, final=True)
        self._sealed = True
        outcome = await self._relay.request(action, wait_connected=True, timeout=timeout)
        self.outcomes.append(outcome)
        if outcome.ambiguous or outcome.code in _SEAL_AGAIN:
            outcome = await self._seal_again(action, outcome)
        self.outcome = outcome
        message_id = outcome.result.get("message_id") if outcome.success else None
        if message_id is not None:
            self.message_ids.append(str(message_id))
        return outcome

    async def _seal_again(self, action: dict[str, Any], lost: Outcome) -> Outcome:
        """Repeat a lost seal, at once and then with a doubling backoff, until a
        definite answer or ``close_timeout`` after the first loss."""
        logger.warning(
            "stream_reply to %s: the seal of draft %s was lost (%s); sending it again "
            "until a definite answer, for at most %g s (the connector answers a repeated "
            "seal with the same message)",
            self.chat_id,
            self.draft_id,
            lost.error,
            self._close_timeout,
        )
        deadline = trio.current_time() + self._close_timeout
        delay = 0.0
        outcome = lost
        sent = 1
        while outcome.ambiguous or outcome.code in _SEAL_AGAIN:
            if trio.current_time() + delay >= deadline:
                break
            await trio.sleep(delay)
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                break
            outcome = await self._relay.request(action, wait_connected=True, timeout=remaining)
            self.outcomes.append(outcome)
            sent += 1
            delay = SEAL_RETRY_DELAY if delay == 0 else delay * 2
        if outcome.ambiguous:
            logger.warning(
                "stream_reply to %s: the seal of draft %s stayed ambiguous after %d sends "
                "(%s); nothing else is sent",
                self.chat_id,
                self.draft_id,
                sent,
                outcome.error,
            )
        return outcome

    async def _seal_on_screen(self) -> None:
        """The block failed: seal what the stream shows, best effort and bounded."""
        if not (self.live and self._stream_is_message and self._on_screen and not self._sealed):
            return
        with trio.CancelScope(shield=True), trio.move_on_after(self._close_timeout):
            await self._seal(self._on_screen, timeout=self._close_timeout)

    # --- send and edits --------------------------------------------------------------

    async def _flush_edits(self, *, final: bool) -> None:
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
        if self._reply_to is not None and self.outcome is None:  # the reply's first message
            action["reply_to"] = self._reply_to
        with_format_hints(action, self._hints)
        if self._aborted:
            return False
        outcome = await self._relay.request(action, wait_connected=True)
        self.outcomes.append(outcome)
        self.outcome = outcome
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
        # With edits (or a live card) the user now watches the text grow; without, they
        # wait for whole pieces, so typing goes on until the block ends.
        if self._edits or self.live:
            self._typing_off.set()

    async def _edit(self, content: str) -> None:
        assert self._message_id is not None
        action: dict[str, Any] = {
            "op": "edit",
            "chat_id": self.chat_id,
            "message_id": self._message_id,
            "content": content,
        }
        with_format_hints(action, self._hints)
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
    relay: RelayPort,
    chat_id: str,
    *,
    reply_to: str | None,
    edit_interval: float,
    format_hints: Mapping[str, Any] | None = None,
    close_timeout: float = 1.0,
) -> AsyncIterator[StreamReply]:
    """See [`Relay.stream_reply`][trio_relay.Relay.stream_reply]."""
    reply = StreamReply(
        relay,
        chat_id,
        relay.descriptor_for(chat_id),
        reply_to=reply_to,
        edit_interval=edit_interval,
        format_hints=format_hints,
        close_timeout=close_timeout,
    )
    raised: BaseException | None = None
    try:
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
                try:
                    await pump_done.wait()
                except trio.Cancelled as exc:
                    # Cancelled (the user stopped the turn) while the last send, edit or
                    # seal is out: it completes, within close_timeout, so the reply knows
                    # the message the user sees.
                    raised = exc
                    reply._last_flush.deadline = trio.current_time() + reply._close_timeout
                    with trio.CancelScope(shield=True):
                        await pump_done.wait()
                    reply._aborted = True
            finally:
                reply._closing = True
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The tasks' own Cancelled, when the block was cancelled from outside: the
        # block's Cancelled comes out below as itself (an `except trio.Cancelled` in
        # the handler must see it), never as a group.
        if raised is None or group.split(trio.Cancelled)[1] is not None:
            raise
    finally:
        if raised is not None:
            # A live card whose turn died ends as what it already shows. (In a finally:
            # when the block was cancelled, the nursery's exit raises Cancelled too.)
            await reply._seal_on_screen()
    if raised is not None:
        raise raised
