"""Task cards: a turn's progress as a card of task chunks (docs/protocol.md, "Task
cards"; Slack's plan mode).

``async with relay.task_card(chat_id, reply_to=...) as card`` opens one card a turn;
each ``await card.update(tasks)`` sends the whole list of chunks (a ``task_card``
frame), and leaving the block ends the card (``task_card_stop``). Progress is advisory:
a lost frame is cosmetic and the connector seals orphaned cards itself, so neither an
update nor the stop ever raises for a network failure; each returns its
[`Outcome`][trio_relay.Outcome]. Where the chat's descriptor does not list ``task_card``, ``update``
returns an ``unsupported_op`` outcome and nothing is sent.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

import trio

from ..._core import outcome as _outcome
from ..._core.outcome import Outcome

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["TaskCard", "TaskChunk", "TaskStatus", "open_task_card"]

TaskStatus = Literal["pending", "in_progress", "complete", "error"]
"""The states of a task chunk."""

_STATUSES: tuple[str, ...] = get_args(TaskStatus)


@dataclass(frozen=True, slots=True)
class TaskChunk:
    """One task of a task card: ``id`` (stable across updates), ``title``, ``status``
    (``pending``, ``in_progress``, ``complete`` or ``error``) and optional ``details``.
    The connector cuts each field to 256 characters."""

    id: str
    title: str
    status: TaskStatus
    details: str = ""

    def __post_init__(self) -> None:
        for name in ("id", "title", "details"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(
                    f"TaskChunk.{name} must be a str, got {type(getattr(self, name)).__name__}"
                )
        if self.status not in _STATUSES:
            raise ValueError(
                f"TaskChunk.status must be one of {', '.join(_STATUSES)}, got {self.status!r}"
            )

    def to_wire(self) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": self.id, "title": self.title, "status": self.status}
        if self.details:
            chunk["details"] = self.details
        return chunk


class TaskCard:
    """One turn's task card; get it from [`Relay.task_card`][trio_relay.Relay.task_card].

    ``card_id`` is ``turn:<reply_to>`` (a fresh ``card:<hex>`` without ``reply_to``);
    ``outcomes`` holds every update's outcome in order and ``stopped`` the outcome of
    the ``task_card_stop`` sent when the block ended (``None`` when nothing was ever
    sent, so there was no card to stop).
    """

    def __init__(self, relay: RelayPort, chat_id: str, *, reply_to: str | None) -> None:
        self._relay = relay
        self.chat_id = chat_id
        fresh = f"card:{secrets.token_hex(8)}"
        self.card_id = f"turn:{reply_to}" if reply_to is not None else fresh
        self._metadata: dict[str, Any] = {} if reply_to is None else {"thread_ts": reply_to}
        self.outcomes: list[Outcome] = []
        self.stopped: Outcome | None = None
        self._sent = False
        self._ended = False

    def _action(self, op: str, **fields: Any) -> dict[str, Any]:
        action: dict[str, Any] = {"op": op, "chat_id": self.chat_id, "card_id": self.card_id}
        action.update(fields)
        if self._metadata:
            action["metadata"] = dict(self._metadata)
        return action

    def _supported(self) -> Outcome | None:
        descriptor = self._relay.descriptor_for(self.chat_id)
        if descriptor is None or not descriptor.supports("task_card"):
            platform = descriptor.platform if descriptor is not None else "(none yet)"
            return _outcome.unsupported_op("task_card", platform)
        return None

    async def update(self, tasks: Iterable[TaskChunk]) -> Outcome:
        """Show ``tasks`` (the whole list, in order) on the card. Returns the outcome;
        never raises for a network failure. Raises ``TypeError`` for an item that is
        not a [`TaskChunk`][trio_relay.TaskChunk], and ``RuntimeError`` after the block has
        ended."""
        chunks = []
        for task in tasks:
            if not isinstance(task, TaskChunk):
                raise TypeError(f"update() takes TaskChunk items, got {type(task).__name__}")
            chunks.append(task.to_wire())
        if self._ended:
            raise RuntimeError("the task_card block has ended; update the card inside it")
        unsupported = self._supported()
        if unsupported is not None:
            self.outcomes.append(unsupported)
            return unsupported
        shown_before, self._sent = self._sent, True  # (a cancelled update may show)
        outcome = await self._relay.request(self._action("task_card", chunks=chunks))
        self.outcomes.append(outcome)
        if not (outcome.success or outcome.ambiguous):
            self._sent = shown_before  # refused: no card came of it, none to stop
        return outcome

    # ASYNC109: the stop is a request: its timeout= ends in an Outcome.
    async def _stop(self, timeout: float) -> None:  # noqa: ASYNC109
        self._ended = True
        if not self._sent:
            return
        # Shielded and bounded: the card ends even when the turn was cancelled.
        with trio.CancelScope(shield=True), trio.move_on_after(timeout):
            self.stopped = await self._relay.request(
                self._action("task_card_stop"), timeout=timeout
            )


@asynccontextmanager
async def open_task_card(
    relay: RelayPort, chat_id: str, *, reply_to: str | None, close_timeout: float
) -> AsyncIterator[TaskCard]:
    """See [`Relay.task_card`][trio_relay.Relay.task_card]."""
    card = TaskCard(relay, chat_id, reply_to=reply_to)
    try:
        yield card
    finally:
        await card._stop(close_timeout)
