"""Redial delays: immediate after a healthy connection, then a capped, jittered ladder.

Most drops of a long-lived link are transient (a connector deploy, a load balancer
cutting an idle flow), so the first redial after a connection that proved stable goes
out at once (``first_delay``, default 0). Every further consecutive attempt waits a
uniform random time in ``[d/2, d]`` where ``d`` doubles from ``initial`` up to
``maximum``: the jitter spreads a herd of gateways redialling a restarted connector. The
ladder is kept across flapping connections — ones that end before ``reset_after``
seconds — so a connector that accepts and then drops us is not hammered; a connection
that lives that long resets it.

Sans-I/O: time and randomness come in as arguments.
"""

from __future__ import annotations

import random


class Backoff:
    def __init__(
        self,
        *,
        initial: float = 1.0,
        maximum: float = 30.0,
        first_delay: float = 0.0,
        reset_after: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        values = (initial, maximum, first_delay, reset_after)
        if not all(0 <= v < float("inf") for v in values) or maximum < initial:
            raise ValueError(
                "backoff needs 0 <= initial <= maximum, first_delay >= 0 and "
                f"reset_after >= 0; got initial={initial}, maximum={maximum}, "
                f"first_delay={first_delay}, reset_after={reset_after}"
            )
        self._initial = initial
        self._maximum = maximum
        self._first_delay = first_delay
        self._reset_after = reset_after
        self._rng = rng or random.Random()
        self._attempts = 0

    @property
    def attempts(self) -> int:
        """Consecutive redial attempts since the ladder was last reset."""
        return self._attempts

    def next_delay(self) -> float:
        """The wait before the next dial; each call climbs one rung."""
        attempt = self._attempts
        self._attempts += 1
        if attempt == 0:
            return self._first_delay
        # Capped exponent: 2.0 ** 1024 raises OverflowError after a long outage.
        ceiling = min(self._maximum, self._initial * 2.0 ** min(attempt - 1, 1000))
        return self._rng.uniform(ceiling / 2, ceiling)

    def connection_ended(self, lived: float) -> None:
        """Report a connection that was up for ``lived`` seconds before it ended."""
        if lived >= self._reset_after:
            self.reset()

    def reset(self) -> None:
        self._attempts = 0
