"""What the adapter plane needs of a relay: the narrow interface it is written against.

The adapter plane (``send_text``, ``stream_reply``, ``ask``) sits above the relay and
reaches it only through `RelayPort`, so nothing in ``adapter/`` imports the
relay's module and the relay can import the plane without an import cycle.
[`Relay`][trio_relay.Relay] satisfies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..._core.descriptor import Descriptor
from ..._core.outcome import Outcome

__all__ = ["RelayPort"]


class RelayPort(Protocol):
    """The relay as the adapter plane sees it (see [`trio_relay.Relay`][trio_relay.Relay])."""

    descriptors: dict[str, Descriptor]
    default_platform: str | None
    name: str
    """The relay's name, in the adapter's log records (called from the user's tasks too)."""

    async def request(
        self,
        action: Mapping[str, Any],
        *,
        platform: str | None = None,
        # ASYNC109: Relay.request's signature, timeout= included.
        timeout: float | None = None,  # noqa: ASYNC109
        wait_connected: bool = False,
    ) -> Outcome: ...

    def descriptor_for(self, chat_id: str) -> Descriptor | None: ...

    async def send_text(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> list[Outcome]: ...
