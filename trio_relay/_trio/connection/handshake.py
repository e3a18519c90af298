"""The handshake of a :class:`~trio_relay._trio.connection.connection.Connection` (built over its
timer and send side): one ``hello`` per identity, up on the first descriptor of a
hello'd platform (docs/protocol.md, "Handshake"), later descriptors added as they come.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from ..._core.codec import encode_frame
from ..._core.config import Identity
from ..._core.descriptor import Descriptor, shared
from ..._core.frames import DescriptorFrame, FrameError, Hello
from .outbox import MAX_BATCH_FRAMES
from .timer import Timer

logger = logging.getLogger("trio_relay")


class Handshake(Timer):
    descriptors: dict[str, Descriptor]
    _platforms: tuple[str, ...]
    _descriptor_came: trio.Event | None
    _all_descriptors: trio.Event | None
    up_at: float | None

    if TYPE_CHECKING:  # defined by Connection

        def send_line(self, line: bytes) -> bool: ...

    async def handshake(self, identities: Sequence[Identity], timeout: float) -> bool:
        """Send one ``hello`` per identity and wait for the first descriptor of a
        hello'd platform: from then on the connection is up (docs/protocol.md,
        "Handshake"); later descriptors are added as they arrive.

        True when the connection is up; false when it ended or timed out first (then it
        has been ended).
        """
        # A tuple, not a frozenset (48 bytes for one platform, not 216): a handful
        # of platforms at most, kept by every connection.
        self._platforms = tuple(dict.fromkeys(identity.platform for identity in identities))
        lines = [
            encode_frame(Hello(identity.platform, identity.bot_id, identity.command_manifest))
            .encode()
            for identity in identities
        ]
        ws = self.ws
        if (
            ws.can_send_now  # (the peer may have closed already, in the 101's read)
            and len(lines) <= MAX_BATCH_FRAMES
            and sum(map(len, lines)) <= self._config.max_message_bytes
        ):
            # A fresh socket takes the hellos at once: written here, in one message,
            # they save starting the writer (part of every redial's time).
            self._send_now(b"".join(lines), len(lines))
        else:
            for line in lines:
                self.send_line(line)
        if not self.descriptors:  # (one may have come with the 101)
            came = self._descriptor_came = trio.Event()
            with trio.move_on_after(timeout):
                await came.wait()
            self._descriptor_came = None  # of no use once up: not held by idle relays
        if self.is_open and not self.descriptors:
            self.end(f"handshake timeout: no descriptors within {timeout:g} s")
        if self.is_open:
            self.up_at = trio.current_time()
        return self.is_open

    def missing_descriptors(self) -> list[str]:
        """The hello'd platforms that have no descriptor yet."""
        return sorted(p for p in self._platforms if p not in self.descriptors)

    @property
    def has_all_descriptors(self) -> bool:
        return len(self.descriptors) == len(self._platforms)

    async def wait_all_descriptors(self) -> None:
        """Return once every hello'd platform has its descriptor (the caller bounds it)."""
        if not self.has_all_descriptors:
            if self._all_descriptors is None:
                self._all_descriptors = trio.Event()
            await self._all_descriptors.wait()

    def _add_descriptor(self, frame: DescriptorFrame) -> None:
        try:
            descriptor = shared(Descriptor.from_wire(frame.descriptor))
        except FrameError as exc:
            self._stats.frames_rejected += 1
            logger.warning("skipped a bad descriptor from the connector: %s", exc)
            return
        platform = descriptor.platform
        if platform not in self._platforms:
            self._stats.frames_rejected += 1
            logger.warning(
                "skipped a descriptor for platform %r: we said hello for %s only",
                platform,
                sorted(self._platforms),
            )
            return
        if platform in self.descriptors:
            return  # the first one of a connection stands
        self.descriptors[platform] = descriptor
        if self._descriptor_came is not None:
            self._descriptor_came.set()
        if self._all_descriptors is not None and self.has_all_descriptors:
            self._all_descriptors.set()
