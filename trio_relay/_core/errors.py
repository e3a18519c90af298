"""Exceptions a user of the relay can meet. Each message says what happened and what
to do; none carries a token or secret."""

from __future__ import annotations


class RelayError(Exception):
    """Base of the relay's own exceptions."""


class RelayClosed(RelayError):
    """The relay was closed; open a new one to talk to the connector again."""


class RelayRevoked(RelayError):
    """The connector revoked this gateway's credentials; the relay stopped dialling."""
