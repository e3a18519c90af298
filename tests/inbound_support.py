"""Drive an InboundPipeline directly, fed frames decoded from raw connector JSON lines.

Every delivery goes through ``FrameDecoder(CONNECTOR_FRAMES)`` and the pipeline's own
``MessageEvent.from_wire``: the dedupe sees exactly what the wire carries, never a
hand-built event. Shared by the tests/trio inbound test modules.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from trio_relay._core.codec import FrameDecoder, RejectedFrame
from trio_relay._core.config import RelayConfig
from trio_relay._core.dedupe import Claim
from trio_relay._core.dedupe_store import DedupeSession, DedupeStore, MemoryDedupeStore
from trio_relay._core.event import MessageEvent
from trio_relay._core.frames import (
    CONNECTOR_FRAMES,
    InboundFrame,
    InterruptInbound,
    PassthroughFrame,
)
from trio_relay._core.passthrough import PassthroughForward
from trio_relay._core.settings import InboundSettings
from trio_relay._core.stats import RelayStats
from trio_relay._trio.inbound.pipeline import DeadLetter, InboundPipeline

Wire = dict[str, Any]


def msg(
    platform: str | None = "slack",
    chat: str | int | None = "C1",
    mid: str | int | None = "m1",
    *,
    buffer: str | int | None = None,
    text: str = "hi",
) -> Wire:
    """An ``inbound`` frame as the connector writes it (absent fields left out)."""
    source: Wire = {"user_id": "U1"}
    if platform is not None:
        source["platform"] = platform
    if chat is not None:
        source["chat_id"] = chat
    event: Wire = {"text": text, "source": source}
    if mid is not None:
        event["message_id"] = mid
    frame: Wire = {"type": "inbound", "event": event}
    if buffer is not None:
        frame["bufferId"] = buffer
    return frame


def passthrough(buffer: str | None = None, body: bytes = b"payload=1") -> Wire:
    import base64

    frame: Wire = {
        "type": "passthrough_forward",
        "forward": {
            "platform": "slack", "botId": "B1", "method": "POST", "path": "/slack/commands",
            "headers": [["X-Slack-Signature", "v0=secret-sig"]],
            "bodyB64": base64.b64encode(body).decode(),
        },
    }
    if buffer is not None:
        frame["bufferId"] = buffer
    return frame


def interrupt(session: str = "S1", chat: str = "C1") -> Wire:
    return {"type": "interrupt_inbound", "session_key": session, "chat_id": chat}


class RecordingStore:
    """A :class:`~trio_relay.DedupeStore` (the public seam) that records what the
    pipeline asks of it, in order, over a real :class:`~trio_relay.MemoryDedupeStore`:
    ``calls`` holds ``("claim" | "commit" | "release", key)`` pairs."""

    def __init__(self, inner: DedupeStore | None = None) -> None:
        self.inner: DedupeStore = inner if inner is not None else MemoryDedupeStore()
        self.calls: list[tuple[str, str]] = []

    def keys(self, step: str) -> list[str]:
        return [key for done, key in self.calls if done == step]

    @asynccontextmanager
    async def _session(
        self, namespace: str, capacity: int, stats: RelayStats
    ) -> AsyncIterator[DedupeSession]:
        async with self.inner.open(namespace=namespace, capacity=capacity, stats=stats) as s:
            yield _RecordingSession(s, self.calls)

    def open(
        self, *, namespace: str, capacity: int, stats: RelayStats
    ) -> AbstractAsyncContextManager[DedupeSession]:
        return self._session(namespace, capacity, stats)


class _RecordingSession:
    def __init__(self, inner: DedupeSession, calls: list[tuple[str, str]]) -> None:
        self._inner, self._calls = inner, calls

    async def load_recent(self) -> list[str]:
        return await self._inner.load_recent()

    async def claim(self, key: str) -> Claim:
        self._calls.append(("claim", key))
        return await self._inner.claim(key)

    def commit(self, key: str) -> None:
        self._calls.append(("commit", key))
        self._inner.commit(key)

    def release(self, key: str) -> None:
        self._calls.append(("release", key))
        self._inner.release(key)


@dataclass
class Harness:
    pipeline: InboundPipeline
    stats: RelayStats
    acks: list[str] = field(default_factory=list)
    connected: bool = True
    written: bool = True
    decoder: FrameDecoder = field(default_factory=lambda: FrameDecoder(CONNECTOR_FRAMES))
    nursery: trio.Nursery | None = None

    async def start(self) -> None:
        """Start ``pipeline.run`` (for harnesses opened with ``start=False``)."""
        assert self.nursery is not None
        await self.nursery.start(self.pipeline.run)

    def send_ack(self, buffer_id: str, on_written: Callable[[], None]) -> bool:
        """Like the relay's: refused without a connection; else queued, and written at
        once unless ``written`` is off (the connection will die with it queued)."""
        if not self.connected:
            return False
        self.acks.append(buffer_id)
        if self.written:
            on_written()
        return True

    def feed(self, *wire: Wire | str) -> None:
        """Decode raw JSON lines (objects are serialised first) and submit each frame,
        as the reader does: synchronously."""
        payload = "".join(w if isinstance(w, str) else json.dumps(w) + "\n" for w in wire)
        for frame in self.decoder.feed(payload):
            assert not isinstance(frame, RejectedFrame), frame
            assert isinstance(frame, (InboundFrame, PassthroughFrame, InterruptInbound))
            self.pipeline.submit(frame)


@asynccontextmanager
async def running(
    *,
    on_message: Callable[[MessageEvent], Awaitable[None]] | None = None,
    on_interrupt: Callable[[str, str], Awaitable[None]] | None = None,
    on_passthrough: Callable[[PassthroughForward], Awaitable[None]] | None = None,
    on_dead_letter: Callable[[DeadLetter], Awaitable[None]] | None = None,
    start: bool = True,
    **config: Any,
) -> AsyncIterator[Harness]:
    stats = RelayStats()
    class Acks:  # the pipeline's AckSender: the harness below, made after the pipeline
        def send_ack(self, buffer_id: str, on_written: Callable[[], None]) -> bool:
            return h.send_ack(buffer_id, on_written)

    pipeline = InboundPipeline(
        settings=InboundSettings.from_config(RelayConfig(**config)),
        stats=stats, on_message=on_message,
        on_interrupt=on_interrupt, on_passthrough=on_passthrough,
        on_dead_letter=on_dead_letter, acks=Acks(),
    )
    h = Harness(pipeline=pipeline, stats=stats)
    async with trio.open_nursery() as nursery:
        h.nursery = nursery
        if start:
            await h.start()
        yield h
        nursery.cancel_scope.cancel()


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll (real clock): for tests that wait on worker threads (the durable store)."""
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.005)


class Recorder:
    """An on_message handler that records dedupe keys and can be told to fail/block."""

    def __init__(self) -> None:
        self.seen: list[MessageEvent] = []
        self.fail_next = 0
        self.gate: trio.Event | None = None
        self.acks_at_call: list[list[str]] = []
        self.harness: Harness | None = None

    async def __call__(self, event: MessageEvent) -> None:
        self.seen.append(event)
        if self.harness is not None:
            self.acks_at_call.append(list(self.harness.acks))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("handler broke")

    @property
    def keys(self) -> list[str | None]:
        return [e.dedupe_key for e in self.seen]
