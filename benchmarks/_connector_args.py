"""What both connector processes do at start (see :class:`._control.ConnectorProcess`):
the command line they take, and keeping their import-time objects out of the collector."""

from __future__ import annotations

import argparse
import gc
import os

__all__ = ["freeze_imports", "parse"]


def parse(prog: str, argv: list[str] | None) -> argparse.Namespace:
    """``--control PATH [--host H] [--port P] [--cpu N]``; pins this process to CPU
    ``N`` when given (where the OS allows it)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--control", required=True, help="Unix socket path to listen on")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=None, help="pin this process to one CPU")
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    return args


def freeze_imports() -> None:
    """Keep the objects alive now (the imports) out of every cyclic collection's scan,
    as the client's run does (``benchmarks/run.py``). Unfrozen, the reference connector's
    one full collection of a default redial run paused it for tens of milliseconds, in
    the same trio_relay zero-backoff drop of every run (the 69th to 75th of 200: 27.5,
    31.7, 32.1, 44.9 and 54.7 ms in five runs, each that list's slowest drop): the
    connector, not the client, was then the bottleneck."""
    gc.collect()
    gc.freeze()
