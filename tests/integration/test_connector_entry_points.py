"""The reference connector's entry points: ``open_connector`` and ``serve_connector``
take one set of options, their hooks (``on_frame``, ``on_session``) see what happens,
and an exception or Ctrl-C leaves them as itself, not wrapped in a group.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import trio
from connector_support import dial, hello, outbound

from trio_relay.testing import ReferenceConnector, open_connector, serve_connector

# --- the entry points --------------------------------------------------------------


def test_open_and_serve_connector_take_one_set_of_options() -> None:
    options = inspect.signature(open_connector).parameters
    served = inspect.signature(serve_connector).parameters
    assert {"secrets", "descriptors", "validate", "on_frame", "host", "port"} <= set(options)
    assert set(served) == set(options) | {"task_status"}
    with pytest.raises(TypeError):
        open_connector(secret={"gw": "s"})  # type: ignore[call-arg]


async def test_serve_connector_takes_the_same_keywords() -> None:
    async with trio.open_nursery() as nursery:
        connector: ReferenceConnector = await nursery.start(
            lambda task_status: serve_connector(validate=False, task_status=task_status)
        )
        assert connector.options.validate is False
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.send(outbound("r1", "teleport"))
            assert (await peer.frame())["result"]["success"] is True
        nursery.cancel_scope.cancel()


async def test_on_frame_sees_both_directions() -> None:
    seen: list[tuple[str, str]] = []
    async with (
        open_connector(on_frame=lambda s, d, f: seen.append((d, f.TYPE))) as connector,
        dial(connector) as peer,
    ):
        await peer.send(hello("slack"), outbound("r1"))
        await peer.frames(2)
    assert seen == [
        ("in", "hello"),
        ("out", "descriptor"),
        ("in", "outbound"),
        ("out", "outbound_result"),
    ]


async def test_keyboard_interrupt_in_the_block_comes_out_as_itself() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        async with open_connector():
            raise KeyboardInterrupt
    assert type(info.value) is KeyboardInterrupt


async def test_keyboard_interrupt_in_a_session_task_comes_out_as_itself() -> None:
    async def handler(session: Any, frame: Any) -> dict[str, Any]:
        raise KeyboardInterrupt  # as if Ctrl-C landed while this task ran

    with pytest.raises(KeyboardInterrupt) as info:
        async with open_connector(outbound_handler=handler) as connector, dial(connector) as peer:
            await peer.handshake()
            await peer.send(outbound("r1"))
            await trio.sleep_forever()
    assert type(info.value) is KeyboardInterrupt


async def test_on_session_sees_opens_closes_and_refusals() -> None:
    seen: list[tuple[int, str, int | None, str | None]] = []

    def watch(session: Any, event: str) -> None:
        seen.append((session.index, event, session.close_code, session.refused))

    async with open_connector(on_session=watch) as connector:
        connector.refuse_upgrades(1, 4401, "provisioning")
        async with dial(connector) as peer:
            assert await peer.closed() == (4401, "provisioning")
        async with dial(connector) as peer:
            await peer.handshake()
            await peer.ws.aclose(1000, "bye")
        await connector.wait_until(lambda: len(seen) == 3)
    assert seen == [
        (0, "closed", 4401, "provisioning"),
        (1, "open", None, None),
        (1, "closed", 1000, None),
    ]


# --- lifetime -----------------------------------------------------------------------


async def test_body_exception_is_not_wrapped_in_a_group() -> None:
    with pytest.raises(KeyError):
        async with open_connector():
            raise KeyError("mine")


async def test_port_in_use_raises_the_bind_error() -> None:
    async with open_connector() as connector:
        with pytest.raises(OSError):
            async with open_connector(port=connector.port):
                pass  # pragma: no cover


async def test_serve_connector_in_a_nursery() -> None:
    async with trio.open_nursery() as nursery:
        connector = await nursery.start(serve_connector)
        async with dial(connector) as peer:
            await peer.handshake()
        nursery.cancel_scope.cancel()
