"""Guards for streams that go quiet: the peer is alive (its kernel answers keepalive
probes) but the application sends nothing.

Keepalive finds a *dead* peer; only a deadline on the next item finds a *stuck* one. The
async guard is a cancel scope around each wait. The blocking guard cannot cancel a read
in progress, so a worker thread does the reading and the caller waits for each item with
a deadline; when it expires the source's socket is shut down and the source closed,
which ends the worker's read.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import AsyncGenerator, AsyncIterable, Generator, Iterable
from typing import TypeVar

import trio

__all__ = ["StreamStalled", "stall_timeout", "sync_stall_timeout"]

_T = TypeVar("_T")


class StreamStalled(Exception):
    """A stream delivered nothing for longer than its
    [`stall_timeout`][trio_relay.http.stall_timeout]: ``seconds``, kept as an attribute
    of the same name."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"no data arrived for {seconds:g} s, so the stream was abandoned: the peer is "
            "gone or stuck. Retry the request, or give stall_timeout() more seconds if the "
            "server can legitimately stay quiet this long."
        )
        self.seconds = seconds


def _check(seconds: float) -> None:
    if not seconds > 0:
        raise ValueError(f"stall_timeout needs seconds > 0, got {seconds!r}")


async def stall_timeout(source: AsyncIterable[_T], seconds: float) -> AsyncGenerator[_T, None]:
    """Yield from ``source``, raising [`StreamStalled`][trio_relay.StreamStalled] if any next item
    (the first
    included) takes more than ``seconds`` to arrive.

    For example ``async for chunk in stall_timeout(sdk_stream, 60): ...``, with an
    SDK's async stream or ``response.aiter_lines()``. The wrapped iterator is closed
    (``aclose``) when this generator ends, however it ends. If you may stop iterating
    early, wrap the generator in ``contextlib.aclosing`` so that happens at once rather
    than when it is garbage collected.
    """
    _check(seconds)
    iterator = aiter(source)
    try:
        while True:
            # Only the wait for the next item is inside the cancel scope: yielding inside
            # it would let the deadline fire in the consumer's code instead.
            with trio.move_on_after(seconds) as waiting:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
            if waiting.cancelled_caught:
                raise StreamStalled(seconds)
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


_DONE = object()


def sync_stall_timeout(source: Iterable[_T], seconds: float) -> Generator[_T, None, None]:
    """The blocking twin of [`stall_timeout`][trio_relay.http.stall_timeout], for blocking clients
    and SDKs
    (``for chunk in sync_stall_timeout(OpenAI(...).chat.completions.create(...,
    stream=True), 60)``): raises [`StreamStalled`][trio_relay.StreamStalled] when no
    item came for ``seconds``.

    A daemon thread iterates ``source``; each item is waited for with the deadline. On a
    stall, or when the consumer stops early, the connection of an SDK stream or an httpx
    response is shut down and ``source.close()`` called, which ends the thread's read
    (for other sources the thread ends when their next item comes); an exception from
    ``source`` is re-raised in the consumer. Use ``with
    contextlib.closing(...)`` if you may stop iterating early.
    """
    _check(seconds)
    items: queue.SimpleQueue[tuple[object, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in source:
                items.put((item, None))
                if stop.is_set():
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            items.put((_DONE, exc))
        else:
            items.put((_DONE, None))

    worker = threading.Thread(target=pump, name="trio_relay sync_stall_timeout", daemon=True)
    worker.start()
    try:
        while True:
            try:
                item, error = items.get(timeout=seconds)
            except queue.Empty:
                raise StreamStalled(seconds) from None
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item  # type: ignore[misc]  # items holds only _T besides the marker
    finally:
        stop.set()
        if worker.is_alive():
            _shut_down_socket(source)
        close = getattr(source, "close", None)
        if close is not None:
            close()


def _shut_down_socket(source: object) -> None:
    """Wake the worker's blocked read: closing a socket from another thread does not
    (on Linux the read goes on), shutting it down does. Reached through the public
    ``network_stream`` response extension of an SDK stream (``.response``) or a response;
    best effort, since an arbitrary iterable has no socket to find."""
    response = getattr(source, "response", source)
    extensions = getattr(response, "extensions", None)
    if not isinstance(extensions, dict) or "network_stream" not in extensions:
        return
    sock = extensions["network_stream"].get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
