"""The signatures of the user's inbound handlers, and of a pre-handler step.

Sans-I/O: type aliases only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .delivery import DeadLetter
from .event import MessageEvent
from .passthrough import PassthroughForward

__all__ = [
    "DeadLetterHandler",
    "InterruptHandler",
    "MessageHandler",
    "PassthroughHandler",
    "PreHandler",
]

MessageHandler = Callable[[MessageEvent], Awaitable[None]]
InterruptHandler = Callable[[str, str], Awaitable[None]]
"""``on_interrupt(session_key, chat_id)``."""
PassthroughHandler = Callable[[PassthroughForward], Awaitable[None]]
DeadLetterHandler = Callable[[DeadLetter], Awaitable[None]]

PreHandler = Callable[[MessageEvent], Awaitable[MessageEvent | None]]
"""An async step run on each message before ``on_message`` (the relay's own planes plug
in here: media downloaded on receipt, routes recorded, prompt presses consumed); add
one with ``InboundPipeline.add_pre_handler``.

It runs in the message's lane and handler slot, so per-chat order holds and it counts
against ``max_concurrent_handlers``; it runs even when no ``on_message`` is set, and
sees ``event.attempt``. It returns the event to hand on (the same one, or a replacement
such as ``dataclasses.replace(event, ...)``), or ``None`` to *consume* it: the delivery
is then handled (committed and acked) without reaching later steps or ``on_message``. A
step that raises fails the delivery exactly as a raising handler does (not acked,
retried after a backoff up to ``max_delivery_attempts``). Steps run in the order they
were added.
"""
