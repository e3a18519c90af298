"""Running turns: the message handlers running now, by chat, so that a user's stop
(``interrupt_inbound {session_key, chat_id}``) cancels exactly the turn it names.

The pipeline already runs each message's handler in a task it owns; each run is given
a cancel scope of its own here, registered under its chat while the handler runs. An
interrupt cancels the scopes of that chat (synchronously, from the reader's
``submit``: the handler sees ``trio.Cancelled`` at its next checkpoint), and the turn
unwinds by structure: everything the handler opened under it (an LLM stream, a
``stream_reply``, a ``task_card``) ends the way it ends on any cancellation.

The rules, and why:

- **Only a running turn.** A message still waiting in its chat's queue, or for a
  handler slot, is not affected: the user pressed stop on what they saw running, and a
  message sent after it ("stop; do this instead") must not be lost with it. An
  interrupt that finds no running turn for its chat has no effect.
- **Once.** A second interrupt for a turn already stopping cancels nothing more (a
  cancelled scope stays cancelled) and is not counted again.
- **By chat id.** The frame names no platform, so every running turn whose chat id
  equals the frame's is stopped (ids are compared whole, as strings, never split on
  ``:``). Other chats' turns are untouched.
- **Handled, not failed.** The stop was the user's wish, so the delivery is committed
  and acked: no replay runs the turn again (``pipeline.py`` does that part).
"""

from __future__ import annotations

import trio

from ..._core.delivery import Delivery
from ..._core.event import MessageEvent

__all__ = ["RunningTurns"]


class RunningTurns:
    """The cancel scope of each message handler running now, by chat id."""

    # No __dict__: one per relay, held for its whole life.
    __slots__ = ("_by_chat",)

    def __init__(self) -> None:
        # chat id -> the (delivery, scope) of each turn of that chat running now: one per
        # platform at most (a lane is one platform's chat, handled one at a time). Made
        # by the first turn: an idle relay holds no dict (64 bytes each).
        self._by_chat: dict[str, list[tuple[Delivery, trio.CancelScope]]] | None = None

    def begin(self, delivery: Delivery) -> trio.CancelScope | None:
        """The scope to run ``delivery``'s handler in, registered under its chat; pass it
        to `end` when the handler is done. ``None`` for a delivery that belongs to no
        chat (a passthrough forward): nothing can stop it."""
        payload = delivery.payload
        if not isinstance(payload, MessageEvent) or payload.source.chat_id is None:
            return None
        scope = trio.CancelScope()
        if self._by_chat is None:
            self._by_chat = {}
        self._by_chat.setdefault(payload.source.chat_id, []).append((delivery, scope))
        return scope

    def end(self, delivery: Delivery) -> None:
        """``delivery``'s handler is done: an interrupt from now on does not reach it."""
        payload = delivery.payload
        assert isinstance(payload, MessageEvent) and payload.source.chat_id is not None
        chat_id = payload.source.chat_id
        assert self._by_chat is not None
        turns = self._by_chat[chat_id]
        turns[:] = [turn for turn in turns if turn[0] is not delivery]
        if not turns:
            del self._by_chat[chat_id]

    def interrupt(self, chat_id: str) -> list[Delivery]:
        """Cancel the turns of ``chat_id`` not stopping yet; the deliveries it stopped."""
        stopped: list[Delivery] = []
        if self._by_chat is None:
            return stopped
        for delivery, scope in self._by_chat.get(chat_id, ()):
            if not delivery.interrupted:
                delivery.interrupted = True
                scope.cancel()
                stopped.append(delivery)
        return stopped

    def interrupted(self, chat_id: str) -> bool:
        """Whether a turn of ``chat_id`` running now was asked to stop."""
        running = self._by_chat.get(chat_id, ()) if self._by_chat is not None else ()
        return any(delivery.interrupted for delivery, _ in running)
