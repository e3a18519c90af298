"""What every benchmark is given: the mode, the sample-count override, the progress bar,
and a way to start the connector process on its own CPU."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ._control import ConnectorProcess
from ._report import Progress

T = TypeVar("T")

MODES = ("default", "quick", "tiny")


@dataclass
class Context:
    mode: str = "default"
    """``default``; ``quick`` (smaller, for a fast look); ``tiny`` (smallest that still
    runs every code path, for the test suite)."""
    n: int | None = None
    """``-n``: overrides each benchmark's main sample count."""
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))
    connector_cpu: int | None = None
    """The CPU the connector process is pinned to (None: not pinned)."""
    client_cpus: list[int] | None = None

    def pick(self, default: T, quick: T, tiny: T) -> T:
        return {"default": default, "quick": quick, "tiny": tiny}[self.mode]

    def count(self, default: int, quick: int, tiny: int) -> int:
        """The main sample count: ``-n`` if given, else by mode."""
        return self.n if self.n is not None else self.pick(default, quick, tiny)

    def connector(
        self, *, host: str = "127.0.0.1", prefix: Sequence[str] = (), fast: bool = False
    ) -> ConnectorProcess:
        """The reference connector in its own process; ``fast``: the one that only
        answers (:mod:`.fast_connector`), for figures the connector must not limit."""
        module = f"{__package__}.{'fast_connector' if fast else 'connector_proc'}"
        return ConnectorProcess(host=host, cpu=self.connector_cpu, prefix=prefix, module=module)


def plan_cpus(pin: bool) -> tuple[int | None, list[int] | None]:
    """Give the connector the last usable CPU and the client the others (when there are
    at least two); returns (connector CPU, client CPUs)."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None, None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None, None
    return usable[-1], usable[:-1]
