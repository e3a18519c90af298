"""The command line both connector processes take (see :class:`._control.ConnectorProcess`)."""

from __future__ import annotations

import argparse
import os

__all__ = ["parse"]


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
