"""What leaves ``open_relay``: the block's own exception exactly as raised (its cause,
its context, a group it raised), and a KeyboardInterrupt or SystemExit raised in a
handler as itself, never inside an exception group (issue 12, items 5 and 7).

The real client against the reference connector, under the autojump clock.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from relay_support import chat_event

from trio_relay import MessageEvent, State, open_relay
from trio_relay.testing import open_connector

HANG = 60


async def test_raise_from_keeps_cause_and_context(autojump_clock: trio.testing.MockClock) -> None:
    root = OSError("the root cause")
    async with open_connector() as connector:
        with trio.fail_after(HANG), pytest.raises(ValueError, match="boom") as info:
            async with open_relay(connector.url) as relay:
                await relay.wait_connected(5)
                try:
                    raise KeyError("handled first")
                except KeyError:
                    raise ValueError("boom") from root
    exc = info.value
    assert exc.__cause__ is root
    assert isinstance(exc.__context__, KeyError)
    assert exc.__context__.args == ("handled first",)
    assert exc.__suppress_context__  # what `raise ... from` sets, nothing more


async def test_implicit_context_is_kept(autojump_clock: trio.testing.MockClock) -> None:
    async with open_connector() as connector:
        with trio.fail_after(HANG), pytest.raises(RuntimeError) as info:
            async with open_relay(connector.url):
                try:
                    {}["missing"]
                except KeyError:
                    raise RuntimeError("while handling")  # noqa: B904  # the point
    assert isinstance(info.value.__context__, KeyError)
    assert info.value.__cause__ is None
    assert not info.value.__suppress_context__


async def test_a_group_raised_in_the_block_comes_out_as_that_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mine = ExceptionGroup("mine", [ValueError("a"), TypeError("b")])
    single = ExceptionGroup("just one", [ValueError("only")])
    async with open_connector() as connector:
        for raised in (mine, single):
            with trio.fail_after(HANG), pytest.raises(ExceptionGroup) as info:
                async with open_relay(connector.url) as relay:
                    await relay.wait_connected(5)
                    raise raised
            assert info.value is raised
            assert relay.state is State.CLOSED


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
async def test_a_handler_s_keyboardinterrupt_or_systemexit_comes_out_as_itself(
    autojump_clock: trio.testing.MockClock, stop: type[BaseException]
) -> None:
    raised: list[BaseException] = []

    async def on_message(event: MessageEvent) -> None:
        exc = stop()
        raised.append(exc)
        raise exc

    async with open_connector() as connector:
        with trio.fail_after(HANG), pytest.raises(stop) as info:
            async with open_relay(connector.url, on_message=on_message) as relay:
                await relay.wait_connected(5)
                await connector.send_inbound(chat_event("stop please", "m1"))
                await trio.sleep_forever()
        assert type(info.value) is stop  # not a BaseExceptionGroup around it
        assert info.value is raised[0]
        assert relay.state is State.CLOSED
        session = connector.sessions[0]
        with trio.fail_after(5):
            await session.closed.wait()
        assert session.close_code == 1000  # and the relay still closed cleanly


async def test_keyboardinterrupt_in_the_block_comes_out_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_connector() as connector:
        with trio.fail_after(HANG), pytest.raises(KeyboardInterrupt) as info:
            async with open_relay(connector.url) as relay:
                await relay.wait_connected(5)
                raise KeyboardInterrupt
        assert type(info.value) is KeyboardInterrupt
