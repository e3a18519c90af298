"""What a handler is, read from the callable itself when the relay opens: whether it can be
awaited at all, and whether it takes the relay as one more argument.

``async def on_message(event)`` and ``async def on_message(event, relay)`` are both
valid handlers; which one a handler is, is decided once, when the relay opens, from the
signature: never by calling it and seeing what fails. A handler written without
``async`` is refused then too, not on every delivery (where each attempt would run its
side effects and then fail to be awaited).

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["check_async_handler", "takes_extra_argument"]


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


def check_async_handler(keyword: str, handler: object, parameters: str) -> None:
    """Raise ``TypeError`` unless ``handler`` is ``None`` or an async function.

    ``keyword`` is the argument's name (``on_message``), ``parameters`` what the handler
    takes (``event``), for the message. Accepted: an ``async def`` function or method, a
    ``functools.partial`` of one, an object whose ``__call__`` is ``async def``. Refused:
    anything else, a plain function that returns a coroutine (a ``lambda``) included,
    since nothing short of calling it tells it from one that does the work itself.
    """
    if handler is None or _is_async(handler):
        return
    if not callable(handler):
        raise TypeError(
            f"{keyword} must be an async function, got {type(handler).__name__} {handler!r}"
        )
    name = getattr(handler, "__qualname__", None) or repr(handler)
    simple = name if name.isidentifier() else "handler"
    raise TypeError(
        f"{keyword}={name} is not an async function, and the relay awaits its handlers: "
        f"define it as `async def {simple}({parameters}): ...` (a lambda or def that "
        f"returns a coroutine is refused too: wrap the call in an async def)"
    )


def _is_async(handler: object) -> bool:
    # inspect.iscoroutinefunction sees through functools.partial and bound methods; a
    # callable object is judged by its class's __call__.
    if inspect.iscoroutinefunction(handler):
        return True
    return (
        callable(handler)
        and not inspect.isroutine(handler)
        and inspect.iscoroutinefunction(type(handler).__call__)
    )
