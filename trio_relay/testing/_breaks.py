"""Deliberate departures from the protocol, for testing whoever checks a connector.

A connector drifts one clause at a time: it forgets to redeliver what was sent but not
acked, refuses a bad token with the wrong close code, keeps no tombstone of a seal. Each
field of [`ContractBreaks`][trio_relay.testing.ContractBreaks] makes the reference
connector break exactly one such promise of docs/protocol.md, so that a conformance
check (``trio-relay conformance``), or a gateway's tolerance of a sloppy peer, can be
tested against a connector that is otherwise correct. The defaults break nothing.

Plain data: the connector's parts read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._core.close import AUTH_CLOSE_CODE

__all__ = ["NO_BREAKS", "ContractBreaks"]


@dataclass(frozen=True, kw_only=True)
class ContractBreaks:
    """Which promises the reference connector breaks (none, by default)."""

    auth_close_code: int = AUTH_CLOSE_CODE
    """The close code refusing bad, missing or expired credentials (the contract: 4401)."""
    expired_reason: str = "expired"
    """The close reason refusing an expired token (the contract: ``expired``)."""
    require_token: bool = True
    """``False``: an upgrade without a token is admitted, as gateway ``anonymous``."""
    echo_request_ids: bool = True
    """``False``: every ``outbound_result`` names a requestId that was never sent."""
    ack_going_idle: bool = True
    """``False``: ``going_idle`` is never answered (the gateway still goes idle)."""
    buffer_when_idle: bool = True
    """``False``: deliveries still go out live after the ``going_idle_ack``."""
    replay_delivered: bool = True
    """``False``: a buffered delivery, once sent, is forgotten as if it had been acked
    (never replayed, acked or not)."""
    honour_acks: bool = True
    """``False``: an ``inbound_ack`` is recorded but forgets nothing: every handshake
    replays the delivery again."""
    seal_tombstones: bool = True
    """``False``: no tombstone of a sealed draft: a repeated seal opens a new stream,
    with a new ``message_id``."""


NO_BREAKS = ContractBreaks()
"""The reference connector as it is: every promise kept."""
