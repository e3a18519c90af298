"""The ``trio-relay connector`` command: its options, and a connector serving a
terminal (or a script) until Ctrl-C.

`trio_relay.cli` owns the command line and Ctrl-C; this module adds the
``connector`` options to its parser and runs the command (see `._console` for what
the lines on standard input mean).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from .._core.token import check_gateway_id
from ._connector import open_connector
from ._console import Console, frame_printer, lines_of, session_printer
from ._ops import OP_TABLE
from ._session import ANONYMOUS

__all__ = ["add_arguments", "run", "serve_console"]

DEFAULT_GATEWAY_ID = "test-gateway"

RunTrio = Callable[[Callable[[], Awaitable[int]]], int]


def add_arguments(parser: argparse.ArgumentParser, *, secret_env: str) -> None:
    """The options of ``trio-relay connector``."""
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="default 0: any free port")
    parser.add_argument("--gateway-id", help=f"default {DEFAULT_GATEWAY_ID}")
    parser.add_argument("--secret", help=f"default ${secret_env}, else a random one")
    parser.add_argument("--no-auth", action="store_true", help="accept any gateway")
    parser.add_argument(
        "--script",
        metavar="FILE",
        help="replay the lines of FILE as the users (waiting for the gateway, then for the "
        "end of each turn), print the transcripts and exit: 0 if every turn ended",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="with --script: seconds to wait for the gateway and for each turn (default 30)",
    )
    parser.add_argument(
        "--ops",
        default="all",
        metavar="all|legacy|OP,OP",
        help="the supported_ops every descriptor advertises (default all: every op of the "
        "protocol, prompts included; legacy: send, edit, typing, follow_up)",
    )
    parser.add_argument(
        "--idempotency-window",
        type=float,
        default=None,
        metavar="SECONDS",
        help="advertise idempotency_window_s and carry out each idempotency_key at most once "
        "within SECONDS (a repeat gets the first result, replayed); default off",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the frames")


def supported_ops(spec: str) -> list[str]:
    """``--ops``: ``all`` (every op of the protocol), ``legacy`` (an empty list: the
    legacy set), or a comma-separated list."""
    if spec == "all":
        return list(OP_TABLE)
    if spec == "legacy":
        return []
    return [op.strip() for op in spec.split(",") if op.strip()]


def run(args: argparse.Namespace, *, secret_env: str, run_trio: RunTrio) -> int:
    """Run ``trio-relay connector`` with parsed ``args``; its exit status."""
    gateway_id: str | None = None
    secret: str | None = None
    if not args.no_auth:
        gateway_id = args.gateway_id or DEFAULT_GATEWAY_ID
        secret = args.secret or os.environ.get(secret_env) or secrets.token_urlsafe(18)
        try:
            check_gateway_id(gateway_id)
        except ValueError as exc:
            print(f"trio-relay connector: --gateway-id: {exc}", file=sys.stderr)
            return 2
    script: list[str] | None = None
    if args.script is not None:
        try:
            with open(args.script, encoding="utf-8") as file:
                script = file.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            print(f"trio-relay connector: cannot read the script: {exc}", file=sys.stderr)
            return 2
    credentials = {gateway_id: secret} if gateway_id and secret else None
    window = args.idempotency_window
    if window is not None and not window > 0:
        print(
            f"trio-relay connector: --idempotency-window must be a positive number of "
            f"seconds, got {window:g}",
            file=sys.stderr,
        )
        return 2
    try:
        return run_trio(
            lambda: serve_console(
                args.host,
                args.port,
                credentials,
                ops=supported_ops(args.ops),
                script=script,
                timeout=args.timeout,
                show_frames=not args.quiet,
                secret_env=secret_env,
                out=sys.stdout,
                idempotency_window=window,
            )
        )
    except OSError as exc:
        print(
            f"trio-relay connector: cannot listen on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
        )
        return 1


async def serve_console(
    host: str,
    port: int,
    credentials: dict[str, str] | None,
    *,
    ops: list[str],
    script: list[str] | None,
    # ASYNC109: --timeout of --script: exit 1 naming the line that waited too long.
    timeout: float,  # noqa: ASYNC109
    show_frames: bool,
    secret_env: str,
    out: TextIO,
    idempotency_window: float | None = None,
) -> int:
    """``trio-relay connector``: serve (every descriptor advertising ``ops``; empty for
    the legacy set), print the banner (and every frame), then play
    the users from standard input until cancelled, or replay ``script`` and return the
    exit status (0 when every turn ended). ``idempotency_window``: honour idempotency
    keys (``open_connector(idempotency_window=)``)."""
    async with open_connector(
        host=host,
        port=port,
        secrets=credentials,
        descriptors={"*": {"supported_ops": ops}},
        on_frame=frame_printer(out) if show_frames else None,
        on_session=session_printer(out) if show_frames else None,
        idempotency_window=idempotency_window,
    ) as c:
        print(f"url: {c.url}", file=out)
        print(f"websocket: {c.ws_url}", file=out)
        gateway_id = ANONYMOUS
        if credentials is None:
            print("auth: none (any gateway may connect)", file=out)
            print(f"try: trio-relay probe {c.url}", file=out)
        else:
            [(gateway_id, secret)] = credentials.items()
            print(f"gateway id: {gateway_id}", file=out)
            print(f"secret: {secret}", file=out)
            print(
                f"try: {secret_env}=<secret> trio-relay probe {c.url} --gateway-id {gateway_id}",
                file=out,
            )
        console = Console(c, gateway_id, out)
        if script is not None:
            print("serving; replaying the script", file=out, flush=True)
            ok = await console.replay(script, timeout=timeout)
            for chat_id in console.chats:
                print(f"--- transcript of {chat_id}", file=out)
                print(c.transcript_text(chat_id), end="", file=out, flush=True)
            return 0 if ok else 1
        print(
            "serving; type 'C1> hello' to write in chat C1, 'help' for more; Ctrl-C to stop",
            file=out,
            flush=True,
        )
        await console.interact(lines_of(0))
        await c.serve_forever()  # standard input ended: keep serving the gateway
