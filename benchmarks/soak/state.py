"""Everything one soak run shares between its actors, its faults and its verdicts."""

from __future__ import annotations

import random
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from trio_relay.testing import FaultDialer

from .ledger import Flags
from .observe import ErrorLog
from .report import SoakReport

__all__ = ["Soak"]


@dataclass
class Soak:
    seconds: float
    seed: int
    requesters: int = 16
    delivery_rate: float = 30.0
    """Buffered deliveries per second."""
    fault_interval: float = 0.75
    """Mean seconds between faults."""
    hostile_interval: float = 0.5
    """Mean seconds between hostile frames (0: none)."""
    timeouts: tuple[float, float] = (0.25, 2.0)
    """Request timeouts are drawn uniformly from this range."""
    dedupe: str | None = None
    """``--dedupe``: None (memory), a Redis URL or a SQLite path (see
    :func:`.settings.dedupe_store`)."""
    dialer: FaultDialer | None = None
    """What the relay dials through: a pass-through with a tap on the client's writes."""
    idempotency: bool = False
    """The connector honours idempotency keys (the relay then sends an ambiguous
    request again under its key)."""
    progress: Callable[[str], None] | None = None
    watchdog_grace: float = 180.0
    rng: random.Random = field(init=False)
    report: SoakReport = field(init=False)
    flags: Flags = field(default_factory=Flags)
    late: int = 0
    """Requests that returned more than ``DEADLINE_SLACK`` after their deadline."""
    doubles: int = 0
    """Requests that returned twice."""
    mismatched: int = 0
    duplicates: int = 0
    """Messages the connector carried out a second time (the chat shows them twice)."""
    ambiguous_early: int = 0
    """Ambiguous outcomes that came before their request's deadline."""
    """Answers delivered to a request they do not belong to."""
    handled: bytearray = field(default_factory=bytearray)
    """Per delivery index: how many times its handler completed (capped at 255)."""
    attempts: bytearray = field(default_factory=bytearray)
    """Per delivery index: how many times its handler started (capped at 255)."""
    last_request_id: str = ""
    """The last ``requestId`` the connector received (the hostile actor predicts from it)."""
    working_on: set[str] = field(default_factory=set)
    """Request ids the connector received and is slow to answer."""
    forged_taken: Counter[str] = field(default_factory=Counter)
    """Forged results the relay delivered as answers: ``early`` (the frame had not yet
    been handed to the socket), ``sent`` (it had: a lie the relay cannot tell), ``nan``."""
    ghost_descriptors_taken: int = 0
    """Times the relay was seen holding a descriptor for a platform it never hello'd."""
    stop_requests: bool = False
    requests: trio.Nursery | None = None
    """Where requests (bursts included) run: stopping the chaos never cancels one."""
    secret: str = field(default_factory=lambda: secrets.token_hex(16))
    errors: ErrorLog = field(default_factory=ErrorLog)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.report = SoakReport(
            seconds=self.seconds, seed=self.seed, idempotency=self.idempotency
        )
