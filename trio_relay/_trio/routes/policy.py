"""Declaring the relevance policy to the connector: ``POST /relay/policy`` once per
start (docs/protocol.md, "HTTP routes"), fail-soft.

It is sent after the first handshake, when the connector has accepted our credentials
and is surely up, not at the first dial, which may race a connector still starting. A
failure is a warning: the connector keeps its previous (or default) policy and the
relay runs on. An all-default policy is never sent.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..._core.errors import RelayError
from ..._core.policy import RelevancePolicy
from ..log_fields import RELAY_NAME
from .client import ConnectorHttp

__all__ = ["declare_policy"]

logger = logging.getLogger("trio_relay")


class _Connectable(Protocol):
    name: str

    # ASYNC109: Relay.wait_connected's signature.
    async def wait_connected(self, timeout: float | None = None) -> None: ...  # noqa: ASYNC109


async def declare_policy(
    relay: _Connectable, http: ConnectorHttp, policy: RelevancePolicy
) -> bool:
    """Send ``policy`` once the relay is first connected; ``True`` if the connector
    accepted it. Never raises for a failure (only for cancellation)."""
    if policy.is_default:
        return False
    RELAY_NAME.set(relay.name)  # this task's records (and its HTTP client's) name the relay
    try:
        await relay.wait_connected()
    except RelayError:
        return False  # closed or revoked before it ever connected: nobody to tell
    hint = "the connector keeps its current policy; the relay runs on"
    try:
        response = await http.send("POST", http.routes.policy, json=policy.wire_body())
    except Exception as exc:
        logger.warning("relevance policy for %s not declared (%s); %s",
                       policy.platform, type(exc).__name__, hint,
                       extra={"cause": type(exc).__name__})  # fmt: skip
        return False
    await response.aclose()
    if not response.is_success:
        logger.warning("relevance policy for %s refused with HTTP %d; %s",
                       policy.platform, response.status_code, hint,
                       extra={"cause": f"HTTP {response.status_code}"})  # fmt: skip
        return False
    logger.info("relevance policy for %s declared", policy.platform)
    return True
