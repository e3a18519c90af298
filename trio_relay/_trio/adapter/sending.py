"""Sending a text in the pieces that fit, and format hints on an action: what both
``send_text`` (``plane.py``) and a streamed reply's last message (``streaming.py``)
do, kept here so that neither module imports the other for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._core.outcome import Outcome

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["FORMAT_HINTS", "send_pieces", "with_format_hints"]

logger = logging.getLogger("trio_relay")

FORMAT_HINTS = "format_hints"
"""The ``metadata`` key of the hints that ask a connector to render blocks."""


def with_format_hints(action: dict[str, Any], hints: Mapping[str, Any] | None) -> dict[str, Any]:
    """``action`` with ``metadata.format_hints`` set to ``hints`` (as given) when there
    are any; `AdapterPlane.route` strips them again for a platform that would
    not render them."""
    if hints is not None:
        action["metadata"] = {**action.get("metadata", {}), FORMAT_HINTS: dict(hints)}
    return action


async def send_pieces(
    relay: RelayPort,
    chat_id: str,
    pieces: Sequence[str],
    *,
    reply_to: str | None,
    format_hints: Mapping[str, Any] | None,
    wait_connected: bool = False,
) -> list[Outcome]:
    """Send ``pieces`` in order, ``reply_to`` on the first; stop after the first that
    fails. One outcome a piece sent."""
    outcomes: list[Outcome] = []
    for index, piece in enumerate(pieces):
        action: dict[str, Any] = {"op": "send", "chat_id": chat_id, "content": piece}
        if reply_to is not None and index == 0:
            action["reply_to"] = reply_to
        with_format_hints(action, format_hints)
        outcome = await relay.request(action, wait_connected=wait_connected)
        outcomes.append(outcome)
        if not outcome.success:
            # Later pieces would read as a reply with a hole in it; and after an
            # ambiguous one, sending on could post the rest twice on a retry.
            logger.warning(
                "send_text to %s: piece %d of %d failed (%s); the rest was not sent",
                chat_id,
                index + 1,
                len(pieces),
                outcome.error,
                extra={"relay": relay.name, "cause": outcome.code},
            )
            break
    return outcomes
