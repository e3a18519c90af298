"""Requests waiting on one connection, and their deadlines.

A request's task sleeps in :meth:`Waiter.wait` until exactly one outcome is recorded
by whoever learns it first: the reader (a result), the connection's end (ambiguous or
definite), or the connection's :class:`Expiry` (the deadline). A per-request cancel
scope would do the last job too, but costs more than the rest of a request's local work
together, so deadlines are kept per connection instead: the connection's one timer task
(which also sends pings and watches for silence) sleeps in :meth:`Expiry.sleep_until`,
and requests are grouped by their remaining time, in which each group's deadlines only
grow — so only group heads are ever looked at.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import trio

from ..._core.outcome import Outcome

_current_task = trio.lowlevel.current_task
_wait_task_rescheduled = trio.lowlevel.wait_task_rescheduled
_ABORT_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED


class Waiter:
    """One request in flight on one connection.

    It is both the outbox item (the writer marks it as sending) and the rendezvous its
    caller sleeps on. Exactly one :class:`Outcome` is ever recorded.
    """

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = (
        "_task",
        "abandoned",
        "deadline",
        "group",
        "line",
        "may_have_left",
        "outcome",
        "request_id",
        "timeout",
    )

    def __init__(self, request_id: str, line: bytes, deadline: float, timeout: float) -> None:
        self.request_id = request_id
        self.line = line
        self.deadline = deadline
        self.timeout = timeout
        self.may_have_left = False
        """True from the moment the writer starts writing the frame's message."""
        self.abandoned = False
        """The caller gave up (cancelled) or the outcome is settled: do not send."""
        self.outcome: Outcome | None = None
        self._task: trio.lowlevel.Task | None = None
        self.group: deque[Waiter] | None = None
        """Its deadline group in the connection's :class:`Expiry`."""

    @property
    def settled(self) -> bool:
        return self.outcome is not None or self.abandoned

    def mark_sending(self) -> None:
        self.may_have_left = True

    def mark_written(self) -> None:
        self.line = b""  # the payload is no longer needed; do not hold it until expiry

    def resolve(self, outcome: Outcome) -> None:
        if self.outcome is None:
            self.outcome = outcome
            task, self._task = self._task, None
            if task is not None:
                trio.lowlevel.reschedule(task)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return _ABORT_SUCCEEDED

    async def wait(self) -> Outcome:
        """Sleep until resolved. Cancelling the caller ends the wait with ``Cancelled``
        (the caller then abandons the waiter)."""
        if self.outcome is None:
            self._task = _current_task()
            await _wait_task_rescheduled(self._abort)
        else:
            await trio.lowlevel.checkpoint()
        assert self.outcome is not None
        return self.outcome


class Expiry:
    """The deadlines of one connection's waiters.

    Waiters are grouped by their remaining time at registration (to the millisecond),
    so each group is a FIFO in deadline order. Settled waiters leave a group from its
    head as results arrive (results mostly come back in order), which keeps the groups
    about as long as the number of requests in flight.
    """

    __slots__ = ("_earliest", "_groups", "_on_expired", "_wake")  # no __dict__: one per relay

    def __init__(self, on_expired: Callable[[Waiter], None]) -> None:
        self._on_expired = on_expired
        self._groups: dict[int, deque[Waiter]] = {}
        self._earliest = math.inf
        self._wake: trio.CancelScope | None = None
        """The scope of the timer's current (or last) sleep; moving the deadline of one
        already left changes nothing."""

    def add(self, waiter: Waiter) -> None:
        if waiter.deadline == math.inf:
            return  # never expires
        key = round((waiter.deadline - trio.current_time()) * 1000)
        group = self._groups.get(key)
        if group is None:
            self._groups[key] = group = deque()
        group.append(waiter)
        waiter.group = group
        if waiter.deadline < self._earliest:
            self._earliest = waiter.deadline
            if self._wake is not None and waiter.deadline < self._wake.deadline:
                self._wake.deadline = waiter.deadline

    def prune(self, waiter: Waiter) -> None:
        """Drop settled waiters from the head of ``waiter``'s group."""
        group = waiter.group
        if group is not None:
            # (``settled``, inlined: this runs for every result)
            while group and (group[0].outcome is not None or group[0].abandoned):
                group.popleft()

    def wake_by(self, deadline: float) -> None:
        """Make the current sleep (see :meth:`sleep_scope`) end no later than
        ``deadline``."""
        if self._wake is not None and deadline < self._wake.deadline:
            self._wake.deadline = deadline

    def sleep_scope(self, deadline: float) -> trio.CancelScope:
        """A scope to sleep in until ``deadline`` or the earliest waiter's deadline,
        whichever is first (a waiter added meanwhile with an earlier one shortens the
        sleep). The caller enters it and sleeps in its own frame::

            with expiry.sleep_scope(deadline):
                await trio.lowlevel.wait_task_rescheduled(abort_sleep)

        (Not a coroutine of ours: this wait is where an idle connection's timer spends
        its life, and each level of its await chain is held by every idle relay.)"""
        self._wake = trio.CancelScope(deadline=min(deadline, self._earliest))
        return self._wake

    def expire_due(self) -> None:
        """Expire every waiter whose deadline has passed."""
        if self._earliest > trio.current_time():
            return
        now = trio.current_time()
        earliest = math.inf
        for key, group in list(self._groups.items()):
            while group and (group[0].settled or group[0].deadline <= now):
                waiter = group.popleft()
                if not waiter.settled:
                    self._on_expired(waiter)
            if group:
                earliest = min(earliest, group[0].deadline)
            else:
                del self._groups[key]
        self._earliest = earliest


def abort_sleep(_: object) -> trio.lowlevel.Abort:
    """For ``wait_task_rescheduled``: a sleep that any cancellation ends (what
    ``trio.sleep_forever()`` does, without its frame)."""
    return trio.lowlevel.Abort.SUCCEEDED
