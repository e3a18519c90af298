"""``trio-relay soak``: run the soak from the command line and print its table."""

from __future__ import annotations

import argparse
import logging
import random
import sys
from collections.abc import Sequence

from .report import SoakReport, compare
from .run import run_soak

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``trio-relay soak``: run the soak, print the table; 0 if every invariant held."""
    parser = argparse.ArgumentParser(
        prog="trio-relay soak",
        description="Chaos soak of trio_relay against the in-process reference connector.",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="chaos duration (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="harness seed (default random)")
    parser.add_argument("--requesters", type=int, default=16, help="concurrent requesters")
    parser.add_argument(
        "--delivery-rate", type=float, default=30.0, help="buffered deliveries per second"
    )
    parser.add_argument(
        "--fault-interval", type=float, default=0.75, help="mean seconds between faults"
    )
    parser.add_argument(
        "--dedupe",
        metavar="STORE",
        default=None,
        help="the relay's dedupe store: redis://host:port/db (rediss://, unix://), a SQLite "
        "file path, or memory (the default)",
    )
    parser.add_argument(
        "--hostile-interval",
        type=float,
        default=0.5,
        help="mean seconds between hostile frames (forged early results, NaN, descriptors "
        "for unknown platforms; default 0.5); 0 for none",
    )
    parser.add_argument(
        "--idempotency",
        choices=("off", "on", "both"),
        default="off",
        help="the connector honours idempotency keys (on), not (off, the default), or "
        "run both modes with the same seed and compare them (both)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--log-level", default="CRITICAL", help="log level for the library's logs on stderr"
    )
    args = parser.parse_args(argv)
    level = logging.getLevelName(str(args.log_level).upper())
    if not isinstance(level, int):
        parser.error(f"unknown log level {args.log_level!r}")
    # A handler of our own at the chosen level; the loggers' levels are left alone
    # (the soak needs the relay's ERROR records whatever is printed).
    handler = logging.StreamHandler()
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, old_level))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    modes = {"off": [False], "on": [True], "both": [False, True]}[args.idempotency]
    # One seed for every mode: the same harness choices (faults, sizes, timeouts).
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    reports: list[SoakReport] = []
    try:
        for idempotency in modes:
            reports.append(
                run_soak(
                    args.seconds,
                    seed=seed,
                    requesters=args.requesters,
                    delivery_rate=args.delivery_rate,
                    fault_interval=args.fault_interval,
                    dedupe=args.dedupe,
                    hostile_interval=args.hostile_interval,
                    progress=None if args.quiet else progress,
                    idempotency=idempotency,
                )
            )
            print(reports[-1].render(), flush=True)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    if len(reports) > 1:
        print()
        print(compare(reports))
    return 0 if all(report.ok for report in reports) else 1
