"""The CSPRNG pool behind request ids and WebSocket masking keys
(``_core/random_pool.py``): one draw from the random source per block."""

from __future__ import annotations

import itertools

from trio_relay._core.random_pool import RandomPool

BLOCK = 4096


def test_pieces_come_from_the_random_source_a_block_at_a_time() -> None:
    calls: list[int] = []
    drawn = itertools.count()

    def random_bytes(n: int) -> bytes:
        calls.append(n)
        return bytes(next(drawn) % 256 for _ in range(n))

    keys = RandomPool(4, BLOCK // 4, random_bytes)
    per_block = BLOCK // 4
    taken = [keys.next() for _ in range(per_block + 1)]
    assert calls == [BLOCK, BLOCK]
    assert taken[0] == bytes((0, 1, 2, 3))
    assert taken[1] == bytes((4, 5, 6, 7))
    assert all(len(key) == 4 for key in taken)
    assert taken[per_block] == bytes(i % 256 for i in range(BLOCK, BLOCK + 4))


def test_forgetting_the_pool_draws_a_fresh_block() -> None:
    calls: list[int] = []

    def random_bytes(n: int) -> bytes:
        calls.append(n)
        return bytes(n)

    keys = RandomPool(4, BLOCK // 4, random_bytes)
    keys.next()
    keys.forget()
    keys.next()
    assert calls == [BLOCK, BLOCK]
