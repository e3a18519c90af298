"""The timer task of a :class:`~trio_relay._trio.connection.connection.Connection` (built over its
send side, ``connection_send.py``): pings, the silence deadline, stalled or failed
writes, and request deadlines, in one task (one fewer per idle connection than a pinger
beside a deadline timer)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from .send import SendSide
from .waiters import abort_sleep


class Timer(SendSide):
    """The timer task; it starts the writer (a ping to send) through the send side."""

    _ping_ids: itertools.count[int]

    if TYPE_CHECKING:  # defined by Connection

        def cancel_on_end(self, scope: trio.CancelScope) -> None: ...

        def forget_on_end(self, scope: trio.CancelScope) -> None: ...

    async def run_timer(self) -> None:
        """Run the timer in the caller's task (the one serving the connection) until
        the connection ends: it is cancelled with the connection's nursery, or returns
        having ended it. Pings every ``ping_interval``; ends the connection when nothing
        at all was received for ``ping_timeout`` (any byte is proof of life, so a busy
        peer is never dropped for a late pong) or a write stalled or failed; expires
        requests at their deadlines."""
        interval = self._config.ping_interval
        timeout = self._config.ping_timeout
        ws = self.ws
        next_ping = trio.current_time() + interval
        # The serving task is counted in stats.tasks already; the timer is one of the
        # connection's tasks. (One coroutine level, not a wrapper around a second.)
        self._stats.connection_tasks += 1
        try:
            while True:
                silent_until = ws.last_received + timeout
                wake = min(next_ping, silent_until)
                if self._write_failed_at is not None:
                    wake = min(wake, self._write_failed_at + self._config.close_timeout)
                with self._expiry.sleep_scope(wake):
                    await trio.lowlevel.wait_task_rescheduled(abort_sleep)
                now = trio.current_time()
                self._expiry.expire_due()
                silent_for = now - ws.last_received
                if silent_for >= timeout:
                    self.end(f"keepalive timeout: nothing received for {silent_for:.1f} s")
                    return
                if ws.writing and now - ws.write_started_at >= timeout:
                    self.end(f"write stalled: the socket took no bytes for {timeout:g} s")
                    return
                if (
                    self._write_failed_at is not None
                    and now >= self._write_failed_at + self._config.close_timeout
                ):
                    self.end("write failed: the socket refused our bytes")
                    return
                if now >= next_ping:
                    next_ping = now + interval
                    self._ping(None)
        finally:
            self._stats.connection_tasks -= 1

    def _ping(self, on_pong: Callable[[], None] | None) -> bytes | None:
        # Unanswered pings are bounded: a peer that never pongs but keeps sending is
        # alive, and must not make us hold one entry per ping_interval.
        payload = next(self._ping_ids).to_bytes(4, "big")
        sent_at = trio.current_time()
        stats = self._stats

        def pong() -> None:
            stats.ping_rtt = trio.current_time() - sent_at
            if on_pong is not None:
                on_pong()

        if not self.ws.send_ping(payload, pong):
            return None
        self._start_writer()
        return payload

    async def ping(self) -> float | None:
        """One ping; the RTT in seconds (also kept in stats), or None if the connection
        closed first. The caller bounds the wait."""
        if not self.is_open:
            return None
        answered = trio.Event()
        payload = self._ping(answered.set)
        if payload is None:
            return None
        with trio.CancelScope() as scope:
            self.cancel_on_end(scope)
            try:
                await answered.wait()
            finally:
                self.forget_on_end(scope)
                self.ws.forget_ping(payload)
        if scope.cancelled_caught:
            return None
        return self._stats.ping_rtt
