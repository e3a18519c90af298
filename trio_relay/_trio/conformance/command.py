"""The ``trio-relay conformance`` command: its options, the person who writes the
messages the delivery clauses need, and the report on standard output.

`trio_relay.cli` owns the command line and Ctrl-C; this module adds the options and
runs the check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

import trio

from ..._core.config import Identity
from ..._core.conformance import CLAUSES, Report
from .check import check_connector

__all__ = ["add_arguments", "run"]

RunTrio = Callable[[Callable[[], Awaitable[Report]]], Report]

USAGE_ERROR = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``trio-relay conformance``."""
    parser.add_argument("url", metavar="URL", help="the connector's base URL (http[s]/ws[s])")
    parser.add_argument(
        "--gateway-id",
        required=True,
        metavar="ID",
        help="the gateway to connect as: give the check one of its own (while it runs it "
        "takes that gateway's live deliveries)",
    )
    parser.add_argument(
        "--secret-env",
        required=True,
        metavar="VAR",
        help="the environment variable holding that gateway's secret (never printed)",
    )
    parser.add_argument("--platform", default="relay", metavar="P", help="say hello as P")
    parser.add_argument("--bot-id", default="", metavar="B", help="the hello's botId")
    parser.add_argument(
        "--chat",
        metavar="C",
        help="the one chat the check may send to and asks you to write in; without it, the "
        "clauses that need one are skipped",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        choices=[c.id for c in CLAUSES],
        metavar="CLAUSE",
        help="check these clauses (and those they need) only",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON here")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for anything the contract says must come (default 10)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how long to watch for what must not come (default 1)",
    )


def epilog() -> str:
    width = max(len(c.id) for c in CLAUSES)
    rows = "\n".join(f"  {c.id:<{width}}  {c.title}" for c in CLAUSES)
    return (
        f"clauses (docs/protocol.md):\n{rows}\n\n"
        "exit status: 0 when no clause failed, 1 when one did, 2 for a usage error"
    )


def _terminal_writer(out: TextIO, answers: TextIO) -> Callable[[str, str], Awaitable[bool]]:
    """Ask the person at the terminal to write in the chat; true once they pressed
    Enter, false when standard input is closed (no one to ask)."""

    async def write(chat_id: str, text: str) -> bool:
        print(
            f"conformance: write a message in chat {chat_id} now, for example {text!r}, "
            "then press Enter",
            file=out,
            flush=True,
        )
        line = await trio.to_thread.run_sync(answers.readline, abandon_on_cancel=True)
        return line != ""

    return write


def run(args: argparse.Namespace, *, run_trio: RunTrio) -> int:
    """Run ``trio-relay conformance`` with parsed ``args``; its exit status."""
    secret = os.environ.get(args.secret_env)
    if not secret:
        print(
            f"trio-relay conformance: ${args.secret_env} is not set: export the gateway's "
            "secret in it (--secret-env names the variable, not the secret)",
            file=sys.stderr,
        )
        return USAGE_ERROR
    for name in ("timeout", "settle"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0):
            print(
                f"trio-relay conformance: --{name} must be a positive number of seconds, "
                f"got {value}",
                file=sys.stderr,
            )
            return USAGE_ERROR
    try:
        report = run_trio(
            lambda: check_connector(
                args.url,
                gateway_id=args.gateway_id,
                secret=secret,
                identities=[Identity(args.platform, args.bot_id)],
                chat=args.chat,
                write_message=_terminal_writer(sys.stderr, sys.stdin),
                only=args.only or (),
                timeout=args.timeout,
                settle=args.settle,
            )
        )
    except ValueError as exc:
        # A bad URL, gateway id or clause (their messages never hold the secret).
        print(f"trio-relay conformance: {exc}", file=sys.stderr)
        return USAGE_ERROR
    # The report holds no secret nor token by construction (what the connector said,
    # in the check's words), so it is printed as it is.
    for line in report.lines():
        print(line, flush=True)
    if args.json:
        text = json.dumps(report.to_json(), indent=2, ensure_ascii=False)
        try:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"trio-relay conformance: cannot write {args.json}: {exc}", file=sys.stderr)
            return 1
    return 0 if report.ok else 1
