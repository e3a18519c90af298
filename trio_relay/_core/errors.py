"""Exceptions a user of the relay can meet. Each message says what happened and what
to do; none carries a token or secret."""

from __future__ import annotations


class RelayError(Exception):
    """Base of the relay's own exceptions."""


class RelayClosed(RelayError):
    """The relay was closed; open a new one to talk to the connector again."""


class RelayRevoked(RelayError):
    """The connector revoked this gateway's credentials; the relay stopped dialling."""


class InsecureURLError(ValueError):
    """A plaintext ``ws://`` URL to a host that is not loopback, without an explicit
    opt-in: the upgrade token would travel in the clear."""

    def __init__(self, host: str) -> None:
        super().__init__(
            f"refusing plaintext ws:// to {host!r}: the upgrade token would travel in the "
            "clear. Use https:// or wss://, or set RelayConfig(allow_insecure=True) if the "
            "network is trusted"
        )
        self.host = host
