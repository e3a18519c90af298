"""The LLM preset's timeouts, shared by both families."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LLM_CONNECT_TIMEOUT", "LLM_POOL_TIMEOUT", "LLM_WRITE_TIMEOUT", "refuse_timeout"]

LLM_CONNECT_TIMEOUT = 10.0
"""A provider that cannot be reached in 10 s is better retried than waited for."""
LLM_WRITE_TIMEOUT = 30.0
"""Sending a large prompt over a slow uplink."""
LLM_POOL_TIMEOUT = 30.0
"""Waiting for a free connection when many requests share the client."""


def refuse_timeout(kwargs: Mapping[str, Any], name: str) -> None:
    # A whole-request timeout would bring back the read timeout the preset removes.
    if "timeout" in kwargs:
        raise TypeError(
            f"{name}() sets the timeouts itself (connect, write, pool; never read): pass "
            "connect_timeout=, write_timeout= or pool_timeout=, or use keepalive_client("
            "timeout=...) for a client with a read timeout"
        )
