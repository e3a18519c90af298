"""``RedisDedupeStore`` when the server goes away in the middle of a round trip.

The store's timing (the ``timeout`` bound, fail open) under a mock clock, with a stand-in
for the coredis client passed through the public seam ``RedisDedupeStore.from_client``:
a server that answers until the test kills it, then either never answers or drops the
connection. The real server is exercised in ``tests/integration/test_redis_store.py``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal, Self

import pytest
import trio
import trio.testing

from trio_relay import RedisDedupeStore, RelayStats
from trio_relay._core.dedupe import Claim

Failure = Literal["no answer", "connection lost"]
TIMEOUT = 0.2


class FakeClient:
    """Enough of a ``coredis.Redis`` for the store: ``async with``, one registered
    script (``_round``), and ``ping`` in the subclasses."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def register_script(self, source: str) -> Any:
        return self._round

    async def _round(self, *, keys: list[str], args: list[Any]) -> list[int]:
        raise NotImplementedError


class DyingRedis(FakeClient):
    """A server that answers until it is killed: every claim is new while it is up;
    once ``kill`` is set, a call in flight hangs (``no answer``) or fails when ``cut``
    is set (``connection lost``), and so does every later one."""

    def __init__(self) -> None:
        self.kill: Failure | None = None
        self.in_flight = trio.Event()  # a round has reached the dead server
        self.cut = trio.Event()
        self.rounds = 0

    async def _round(self, *, keys: list[str], args: list[Any]) -> list[int]:
        self.rounds += 1
        if self.kill is not None:
            await self._die()
        return [0] * int(args[3])  # ARGV[4]: how many of the keys are claims

    async def ping(self) -> bytes:
        await self._die()
        raise AssertionError("unreachable")

    async def _die(self) -> None:
        self.in_flight.set()
        if self.kill == "no answer":
            await trio.sleep_forever()
        await self.cut.wait()
        raise ConnectionError("Connection lost while receiving response")


@pytest.mark.parametrize("failure", ["no answer", "connection lost"])
async def test_a_claim_queued_behind_the_round_that_fails_runs_fail_open_within_the_timeout(
    autojump_clock: trio.testing.MockClock, failure: Failure
) -> None:
    # The flake of test_percent_encoded_password_is_decoded_and_never_shown: m1's commit
    # goes out as the server stops; m2's claim queues while that round waits, and the
    # round's failure starts the outage. m2 must then run fail open, not wait for the
    # store to come back (it never does here).
    redis = DyingRedis()
    stats = RelayStats()
    store = RedisDedupeStore.from_client(redis, timeout=TIMEOUT)
    answers: list[tuple[Claim, float]] = []

    async def claim(key: str) -> None:
        answer = await session.claim(key)
        answers.append((answer, trio.current_time()))

    with trio.fail_after(10 * TIMEOUT):
        async with store.open(namespace="gw-a", capacity=16, stats=stats) as session:
            assert await session.claim("slack:C1:m1") is Claim.NEW
            redis.kill = failure
            session.commit("slack:C1:m1")  # its round reaches the dying server
            await redis.in_flight.wait()
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(claim, "slack:C1:m2")  # queued behind that round
                await trio.testing.wait_all_tasks_blocked()
                assert answers == [] and redis.rounds == 2
                redis.cut.set()
            lost = failure == "connection lost"
            # Answered by the failure itself: at once if the connection drops, after
            # the store's timeout if the server just never answers.
            assert answers == [(Claim.NEW, start if lost else start + TIMEOUT)]
            assert stats.dedupe_store_outages == 1
            assert stats.dedupe_store_fail_open == 1
            # Later claims do not wait on the store at all while it is down.
            assert await session.claim("slack:C1:m3") is Claim.NEW
            assert stats.dedupe_store_fail_open == 2
            assert redis.rounds == 2


class FlakyRedis(FakeClient):
    """A server that can go down and come back: while ``down``, a round reaches it
    (``in_flight``) and fails once ``cut`` is set, and ``ping`` fails; the rounds it did
    answer are kept, with the keys and counts each carried."""

    def __init__(self) -> None:
        self.down = False
        self.in_flight = trio.Event()
        self.cut = trio.Event()
        self.answered: list[tuple[list[str], list[Any]]] = []
        self.pings: list[float] = []
        self.failed_at: float | None = None

    async def _round(self, *, keys: list[str], args: list[Any]) -> list[int]:
        if self.down:
            self.in_flight.set()
            await self.cut.wait()
            self.failed_at = trio.current_time()
            raise ConnectionError("Connection lost while receiving response")
        self.answered.append((keys, args))
        return [0] * int(args[3])  # ARGV[4]: how many of the keys are claims

    async def ping(self) -> bytes:
        self.pings.append(trio.current_time())
        if self.down:
            raise ConnectionError("Connection refused")
        return b"PONG"

    def sent(self, kind: Literal["commit", "release"]) -> list[str]:
        """The delivery keys sent as ``kind`` by the rounds answered, in order."""
        out = []
        for keys, args in self.answered:
            n_claim, n_commit, n_release = (int(a) for a in args[3:6])
            start = n_claim if kind == "commit" else n_claim + n_commit
            count = n_commit if kind == "commit" else n_release
            out += [key.rsplit(":", 1)[-1] for key in keys[start : start + count]]
        return out


def _flaky_store() -> tuple[FlakyRedis, RelayStats, RedisDedupeStore]:
    redis = FlakyRedis()
    return redis, RelayStats(), RedisDedupeStore.from_client(redis, timeout=TIMEOUT)


async def _fail_the_round_in_flight(redis: FlakyRedis, stats: RelayStats) -> None:
    await redis.in_flight.wait()
    await trio.testing.wait_all_tasks_blocked()
    redis.cut.set()
    while stats.dedupe_store_outages == 0:
        await trio.sleep(TIMEOUT / 10)


async def test_commits_kept_through_an_outage_are_the_newest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # m1's commit is in the round that fails; m2 and m3 are committed while it waits.
    # Two fit: the newest two (the docstring's promise), not m1 put back behind them.
    redis, stats, store = _flaky_store()
    async with store.open(namespace="gw-a", capacity=2, stats=stats) as session:
        redis.down = True
        session.commit("m1")
        await redis.in_flight.wait()
        session.commit("m2")
        session.commit("m3")
        await _fail_the_round_in_flight(redis, stats)
        redis.down = False
        await trio.sleep(5 * TIMEOUT)  # a probe answers; the kept commits go out
    assert redis.sent("commit") == ["m2", "m3"]


async def test_a_release_in_the_round_that_fails_is_sent_once_the_store_is_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # m1's handler failed: its claim must be let go (DEL if still ours), or other
    # replicas see it "in progress" until the lease runs out.
    redis, stats, store = _flaky_store()
    async with store.open(namespace="gw-a", capacity=16, stats=stats) as session:
        assert await session.claim("m1") is Claim.NEW
        redis.down = True
        session.release("m1")
        await _fail_the_round_in_flight(redis, stats)
        redis.down = False
        await trio.sleep(5 * TIMEOUT)
    assert redis.sent("release") == ["m1"]


async def test_probing_starts_when_the_outage_does_and_repeats_every_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Not at the next renewal (lease / 3 later): kept commits and releases would wait
    # that long after the store is back.
    redis, stats, store = _flaky_store()
    async with store.open(namespace="gw-a", capacity=16, stats=stats) as session:
        redis.down = True
        session.commit("m1")
        await _fail_the_round_in_flight(redis, stats)
        await trio.sleep(3.5 * TIMEOUT)
        failed_at = redis.failed_at
        assert failed_at is not None
        assert [round(t - failed_at, 6) for t in redis.pings] == [
            round(i * TIMEOUT, 6) for i in range(4)
        ]
        redis.down = False
        await trio.sleep(TIMEOUT)
    assert redis.sent("commit") == ["m1"]


async def test_the_outage_is_timed_on_trios_clock(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Down for 90 s of (mock) Trio time, which passes in no wall time at all: the end of
    # the outage must say 90 s, as it would in production, not the wall time that passed.
    redis, stats, store = _flaky_store()
    caplog.set_level(logging.WARNING, logger="trio_relay")
    async with store.open(namespace="gw-a", capacity=16, stats=stats) as session:
        redis.down = True
        session.commit("m1")
        await _fail_the_round_in_flight(redis, stats)
        failed_at = redis.failed_at
        assert failed_at is not None
        await trio.sleep_until(failed_at + 90)
        redis.down = False
        await trio.sleep(2 * TIMEOUT)  # the next probe answers
    back = [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    # Probes run every TIMEOUT, so the first that answers comes within one of 90 s.
    assert len(back) == 1
    found = re.search(r"reachable again after ([0-9.]+) s$", back[0])
    assert found is not None, back
    assert 90 <= float(found.group(1)) <= 90 + TIMEOUT
