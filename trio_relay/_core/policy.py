"""The relevance policy a gateway declares to its connector (docs/protocol.md, "HTTP
routes": ``POST /relay/policy``): which messages of a multi-party chat are for this bot.

Sans-I/O: validation and the wire body. The relay sends it once per start; a policy
with every field at its default is the connector's own default, so it is not sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["POLICY_PATH", "RelevancePolicy"]

POLICY_PATH = "/relay/policy"


@dataclass(frozen=True)
class RelevancePolicy:
    """What the connector should deliver to this gateway from multi-party chats.

    - ``platform``: the platform the policy is for (e.g. ``"slack"``).
    - ``require_address``: only messages that address the bot (a mention, a reply to
      it, a DM) are delivered; others are not.
    - ``free_response_scopes``: scope ids (channels, guilds) where every message is
      delivered even when ``require_address`` is set.
    - ``allow_other_bots``: deliver messages written by other bots too (off by default,
      so two bots cannot talk each other into a loop).
    """

    platform: str
    require_address: bool = False
    free_response_scopes: tuple[str, ...] = ()
    allow_other_bots: bool = False

    def __init__(
        self,
        platform: str,
        require_address: bool = False,
        free_response_scopes: Iterable[str] = (),
        allow_other_bots: bool = False,
    ) -> None:
        if not isinstance(platform, str) or not platform.strip():
            raise ValueError(f"RelevancePolicy.platform must be a platform name, got {platform!r}")
        for name, value in (("require_address", require_address),
                            ("allow_other_bots", allow_other_bots)):  # fmt: skip
            if not isinstance(value, bool):
                raise TypeError(f"RelevancePolicy.{name} must be True or False, got {value!r}")
        if isinstance(free_response_scopes, str):
            # A bare string would be split into letters, each a "scope".
            raise TypeError(
                "RelevancePolicy.free_response_scopes takes a list of scope ids, not one "
                f"string: write ({free_response_scopes!r},)"
            )
        scopes = tuple(free_response_scopes)
        bad = [scope for scope in scopes if not isinstance(scope, str) or not scope]
        if bad:
            raise ValueError(
                f"RelevancePolicy.free_response_scopes must be non-empty strings, got {bad!r}"
            )
        object.__setattr__(self, "platform", platform.strip().lower())
        object.__setattr__(self, "require_address", require_address)
        object.__setattr__(self, "free_response_scopes", tuple(dict.fromkeys(scopes)))
        object.__setattr__(self, "allow_other_bots", allow_other_bots)

    @property
    def is_default(self) -> bool:
        """Every field at its default: the connector behaves so without being told."""
        return not (self.require_address or self.free_response_scopes or self.allow_other_bots)

    def wire_body(self) -> dict[str, Any]:
        """The JSON body of ``POST /relay/policy``."""
        return {
            "platform": self.platform,
            "requireAddress": self.require_address,
            "freeResponseScopes": list(self.free_response_scopes),
            "allowOtherBots": self.allow_other_bots,
        }
