"""A handler takes the relay as one more argument when its signature says so."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from trio_relay._core.handler_signature import takes_extra_argument


async def one(event: object) -> None: ...
async def two(event: object, relay: object) -> None: ...
async def star(*args: object) -> None: ...
async def keyword_only(event: object, *, relay: object = None) -> None: ...
async def two_of_two(event: object, key: str, relay: object) -> None: ...


class Handler:
    async def __call__(self, event: object, relay: object) -> None: ...


@pytest.mark.parametrize(
    ("handler", "arity", "takes"),
    [
        (one, 1, False),
        (two, 1, True),
        (star, 1, False),  # *args takes anything: the documented plain form
        (keyword_only, 1, False),  # a keyword-only parameter is not passed positionally
        (Handler(), 1, True),  # a callable object: its __call__, without self
        (functools.partial(two, "fixed"), 1, False),  # takes one argument now
        (two_of_two, 2, True),  # a dead-letter handler: (dead_letter, key) + relay
        (two, 2, False),
        (len, 1, False),  # a builtin: its signature may not be readable; plain form
    ],
)
def test_takes_extra_argument(handler: Callable[..., Any], arity: int, takes: bool) -> None:
    assert takes_extra_argument(handler, arity) is takes
