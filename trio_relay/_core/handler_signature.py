"""Whether a handler takes the relay as one more argument, read from its signature.

``async def on_message(event)`` and ``async def on_message(event, relay)`` are both
valid handlers; which one a handler is, is decided once, when the relay opens, from the
signature: never by calling it and seeing what fails.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["takes_extra_argument"]


def takes_extra_argument(handler: Callable[..., Any], arity: int) -> bool:
    """True when ``handler`` takes more than ``arity`` positional arguments.

    ``*args`` takes anything, so it keeps the documented plain form (false); a
    keyword-only parameter is not a positional one; a callable whose signature cannot be
    read (a builtin) is the plain form too.
    """
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: the plain form
        return False
    positional = 0
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            return False
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional > arity
