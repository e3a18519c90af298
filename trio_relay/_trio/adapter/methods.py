"""The adapter plane's methods of :class:`~trio_relay._trio.relay.Relay`, mixed into it:
text that fits, streaming replies, task cards, prompts, typing, and each chat's
descriptor. They delegate to ``plane.py``, ``streaming.py``, ``task_cards.py`` and
``prompts.py``; the relay itself only holds the plane (``_adapter``) and its config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

from ..._core.config import RelayConfig
from ..._core.descriptor import Descriptor
from ..._core.outcome import Outcome
from ..._core.prompts import OptionSpec, PromptAnswer
from .plane import AdapterPlane, descriptor_for, send_text
from .streaming import StreamReply, open_stream_reply
from .task_cards import TaskCard, open_task_card

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["AdapterMethods"]


class AdapterMethods:
    _adapter: AdapterPlane
    _config: RelayConfig

    @property
    def _relay(self) -> RelayPort:
        return cast("RelayPort", self)

    def descriptor_for(self, chat_id: str) -> Descriptor | None:
        """The descriptor of the platform ``chat_id`` lives on (from its inbound, or
        ``routes.prime``); the default platform's for a chat never heard from;
        ``None`` before the first descriptor."""
        return descriptor_for(self._relay, chat_id)

    async def send_text(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> list[Outcome]:
        """Send ``text`` to ``chat_id`` in as many messages as its platform's
        ``max_message_length`` needs (cut at paragraphs, lines, words; see
        :meth:`Descriptor.split_text`), in order, ``reply_to`` on the first. Returns one
        outcome a piece sent; after a piece fails, the rest is not sent (the outcomes
        end there). An empty text sends nothing. ``format_hints`` (e.g.
        ``{"rich_blocks": True}``) go as ``metadata.format_hints`` where the platform
        has ``supports_block_formatting``, and are left out elsewhere."""
        return await send_text(
            self._relay, chat_id, text, reply_to=reply_to, format_hints=format_hints
        )

    def stream_reply(
        self,
        chat_id: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[StreamReply]:
        """``async with relay.stream_reply(chat_id) as reply: await reply.write(chunk)``:
        typing until the first text, then one message edited as the text grows (at most
        every ``config.edit_interval`` s), a new message when one is full, a final edit
        on exit; one message per piece where the platform cannot edit. Where the
        platform streams live cards (:attr:`Descriptor.live_cards`) the reply goes as
        ``draft`` frames instead, ended by a seal or, where the draft is only a
        preview, by an ordinary send. ``format_hints`` as for :meth:`send_text`. See
        :class:`StreamReply` for ``message_ids``, ``outcome``, ``outcomes`` and
        ``failed``."""
        return open_stream_reply(
            self._relay,
            chat_id,
            reply_to=reply_to,
            edit_interval=self._config.edit_interval,
            format_hints=format_hints,
            close_timeout=self._config.close_timeout,
        )

    def task_card(
        self, chat_id: str, *, reply_to: str | None = None
    ) -> AbstractAsyncContextManager[TaskCard]:
        """``async with relay.task_card(chat_id, reply_to=msg_id) as card: await
        card.update([TaskChunk("t1", "Search", "in_progress")])``: a turn's progress as
        a card of task chunks, ended (``task_card_stop``) when the block ends, within
        ``config.close_timeout``. Only where the chat's descriptor lists ``task_card``;
        elsewhere ``update`` returns an ``unsupported_op`` outcome and sends nothing.
        Never raises for a network failure: see :class:`TaskCard`."""
        return open_task_card(
            self._relay, chat_id, reply_to=reply_to, close_timeout=self._config.close_timeout
        )

    async def ask(
        self,
        chat_id: str,
        question: str,
        options: Iterable[OptionSpec],
        *,
        kind: str = "approval",
        timeout: float | None = 60.0,
        reply_to: str | None = None,
    ) -> PromptAnswer | None:
        """Ask ``question`` in ``chat_id`` and wait for the answer, at most ``timeout``
        seconds (``None``: no limit). ``options`` are ``(id, label)`` pairs (or labels,
        dicts, :class:`PromptOption`); ``kind`` is ``approval``, ``clarify`` or
        ``choice``. Native buttons (the ``prompt`` op) where the platform advertises
        them, else a numbered list answered by a reply. Returns the
        :class:`PromptAnswer` (option, label, the answering user's source), or ``None``
        at the timeout or when the question could not be sent. The answer is consumed:
        it never reaches ``on_message``."""
        return await self._adapter.prompts.ask(
            self._relay, chat_id, question, options, kind=kind, timeout=timeout, reply_to=reply_to
        )

    async def typing(self, chat_id: str, *, status: str | None = None) -> Outcome:
        """Show the typing indicator in ``chat_id``; ``status`` sets a persistent status
        text where the platform has one (Slack), and ``status=""`` clears it."""
        action: dict[str, Any] = {"op": "typing", "chat_id": chat_id}
        if status is not None:
            action["content"] = status
        return await self._relay.request(action)
