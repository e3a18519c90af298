"""The ``trio-relay`` command: benchmarks, a reference connector, and a probe.

::

    trio-relay --version
    trio-relay bench [NAME|all] [--quick] [-n N] [--check] [--json PATH]
                     [--plot DIR | --no-plot] [--markdown PATH.md] [--update-reference]
    trio-relay connector [--host HOST] [--port PORT] [--gateway-id ID] [--secret S]
                         [--no-auth] [--script FILE [--timeout SECONDS]] [--quiet]
    trio-relay probe URL [--gateway-id ID] [--secret S] [--timeout SECONDS]
    trio-relay conformance URL --gateway-id ID --secret-env VAR [--platform P --bot-id B]
                           [--chat C] [--only CLAUSE...] [--json FILE]

``bench`` and ``soak`` run the benchmarks of a source checkout (its ``benchmarks/``
directory, next to the ``trio_relay`` package: they are not part of the wheel) and need
the ``bench`` extra (the reference connector; matplotlib for the plots, written by
default; ``bench cost`` needs valgrind). ``probe`` prints no secret, ever; it reads the
secret from ``--secret`` or, better (command lines are visible to other users), from the
``TRIO_RELAY_SECRET`` environment variable. ``connector`` prints every frame and reads
user messages from standard input (``C1> hello``); ``--script FILE`` replays a
conversation. Every command ends on Ctrl-C with one line and exit status 130.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import textwrap
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TextIO, TypeVar

import trio

from . import __version__
from ._core.close import AUTH_CLOSE_CODE
from ._core.config import Identity, RelayConfig, UpgradeAuth
from ._core.descriptor import Descriptor
from ._core.errors import InsecureURLError, RelayRevoked
from ._core.state import State
from ._core.token import check_gateway_id
from ._trio.conformance import command as conformance_command
from ._trio.lifetime import open_relay
from ._trio.relay import Relay

__all__ = ["BenchmarksUnavailable", "import_benchmarks", "main"]

BENCHMARKS_PACKAGE = "trio_relay_benchmarks"
"""The name the source tree's ``benchmarks/`` directory is imported under."""

SECRET_ENV = "TRIO_RELAY_SECRET"
T = TypeVar("T")


# --- bench ---------------------------------------------------------------------------


class BenchmarksUnavailable(ImportError):
    """The benchmarks are not here: they live in a source checkout, not in the wheel."""


def import_benchmarks(module: str) -> ModuleType:
    """``trio_relay_benchmarks.<module>``, from the checkout's ``benchmarks/`` directory.

    The benchmarks are a plain directory of the repository, not a package of the wheel
    (a second top-level package would be installed into every user's site-packages), so
    they are found next to the ``trio_relay`` package this command runs from: an
    editable install (``pip install -e '.[dev]'``) or ``python -m trio_relay.cli`` from a
    clone."""
    if BENCHMARKS_PACKAGE not in sys.modules:
        root = Path(__file__).resolve().parent.parent / "benchmarks"
        init = root / "__init__.py"
        if not init.is_file():
            raise BenchmarksUnavailable(
                f"no benchmarks directory at {root}: the benchmarks ship with the source "
                "tree, not the wheel; run this command from a clone installed with "
                "pip install -e '.[dev]'"
            )
        spec = importlib.util.spec_from_file_location(
            BENCHMARKS_PACKAGE, init, submodule_search_locations=[str(root)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[BENCHMARKS_PACKAGE] = package
        try:
            spec.loader.exec_module(package)
        except BaseException:
            del sys.modules[BENCHMARKS_PACKAGE]
            raise
    return importlib.import_module(f"{BENCHMARKS_PACKAGE}.{module}")


def _bench(args: argparse.Namespace) -> int:
    try:
        run = import_benchmarks("run")
    except BenchmarksUnavailable as exc:
        print(f"trio-relay bench: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(
            f"trio-relay bench: the benchmarks cannot be imported ({exc}); from a clone, "
            "install them with: pip install -e '.[dev]'",
            file=sys.stderr,
        )
        return 1
    # --check alone evaluates the counted targets (`cost`): timed figures on a shared
    # machine move too much to hold a target to.
    name = args.name if args.name is not None else "cost" if args.check else run.DEFAULT
    names = list(run.ALL) if name == "all" else [name]
    if args.update_reference and names != ["cost"]:
        print("trio-relay bench: --update-reference goes with `bench cost`", file=sys.stderr)
        return 2
    mode = "tiny" if args.tiny else "quick" if args.quick else "default"
    if args.update_reference:
        return _update_cost_reference()
    try:
        results = run.run_benchmarks(
            names,
            mode=mode,
            n=args.n,
            json_path=args.json,
            plot_dir=None if args.no_plot else args.plot or run.PLOT_DIR,
            plot_required=args.plot is not None,
            markdown_path=args.markdown,
            pin=args.pin,
            check=args.check,
        )
    except Exception as exc:
        if type(exc).__name__ in ("PlotUnavailable", "CostUnavailable"):
            print(f"trio-relay bench: {exc}", file=sys.stderr)
            return 2
        traceback.print_exc()
        print(f"trio-relay bench: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        missed = [t for r in results for t in r.targets if not t.met]
        total = sum(len(r.targets) for r in results)
        print(f"\ncheck: {total - len(missed)} of {total} targets met")
        return 1 if missed else 0
    return 0


def _update_cost_reference() -> int:
    cost = import_benchmarks("cost")
    reason = cost.valgrind_unavailable()
    if reason is not None:
        print(f"trio-relay bench: the counts need valgrind's callgrind: {reason}", file=sys.stderr)
        return 2
    print(f"counting trio_relay {cost.REFERENCE_RUNS} times under callgrind (about 2 minutes)")
    with import_benchmarks("_context").Context().connector(fast=True) as proc:
        path = cost.write_reference(proc.url)
    print(f"wrote {path}: commit it, and say in the message why the counts moved")
    return 0


# --- connector ------------------------------------------------------------------------


def _unavailable(command: str, reason: str) -> int:
    print(f"trio-relay {command}: {reason}", file=sys.stderr)
    return 1


def _connector_missing() -> str | None:
    """Why ``trio-relay connector`` cannot run here (the ``testing`` extra is not
    installed: the error names it), or ``None`` when it can."""
    try:
        from .testing import _connector_command  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def _connector(args: argparse.Namespace) -> int:
    from .testing._connector_command import run

    return run(args, secret_env=SECRET_ENV, run_trio=_run_trio)


# --- probe ----------------------------------------------------------------------------


def _describe(descriptor: Descriptor) -> str:
    features = [
        name
        for name, on in (
            ("edit", descriptor.supports_edit),
            ("threads", descriptor.supports_threads),
            ("draft streaming", descriptor.supports_draft_streaming),
        )
        if on
    ]
    ops = ", ".join(sorted(descriptor.effective_ops))
    return (
        f"platform {descriptor.platform}: {descriptor.label!r}, contract v"
        f"{descriptor.contract_version}, max {descriptor.max_message_length} "
        f"{descriptor.len_unit}, markdown {descriptor.markdown_dialect}, "
        f"supports {', '.join(features) or 'no extras'}; ops: {ops}"
    )


class ProbeFailed(Exception):
    pass


async def _probe(
    url: str,
    *,
    auth: UpgradeAuth | None,
    identities: list[Identity],
    # ASYNC109: the probe's --timeout, reported as a one-line failure.
    timeout: float,  # noqa: ASYNC109
    allow_insecure: bool,
    out: TextIO,
) -> None:
    config = RelayConfig(
        connect_timeout=timeout,
        handshake_timeout=timeout,
        allow_insecure=allow_insecure,
    )
    started = time.monotonic()
    try:
        async with open_relay(url, identities=identities, auth=auth, config=config) as relay:
            await _first_attempt(relay, timeout)
            connected_in = time.monotonic() - started
            print(f"connected to {relay.url} in {connected_in * 1000:.1f} ms", file=out)
            for descriptor in relay.descriptors.values():
                print(_describe(descriptor), file=out)
            try:
                rtt = await relay.ping(timeout=timeout)
            except (ConnectionError, TimeoutError) as exc:
                raise ProbeFailed(f"connected, but the ping failed: {exc}") from None
            print(f"ping RTT: {rtt * 1000:.2f} ms", file=out, flush=True)
    except InsecureURLError as exc:
        raise ProbeFailed(
            f"refusing plaintext ws:// to {exc.host!r}: the upgrade token would travel in "
            "the clear; use https:// (or wss://), or pass --allow-insecure if the network "
            "is trusted"
        ) from None


# ASYNC109: the probe's --timeout, reported as a one-line failure.
async def _first_attempt(relay: Relay, timeout: float) -> None:  # noqa: ASYNC109
    """Return once connected; raise `ProbeFailed` if the first attempt ends
    otherwise (a failed dial, or a link that ends before its handshake) or times out."""

    async def first_end(cancel_scope: trio.CancelScope) -> None:
        # The relay records each end in stats once it has taken it in.
        # ASYNC110: no event announces a failed first dial; its end is recorded in stats, polled for
        # at most --timeout.
        while relay.stats.last_end_cause is None:  # noqa: ASYNC110
            await trio.sleep(0.005)
        cancel_scope.cancel()

    with trio.move_on_after(timeout):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_end, nursery.cancel_scope)
            try:
                await relay.wait_state(State.CONNECTED)
            except RelayRevoked:
                raise ProbeFailed("the connector refused our credentials (revoked)") from None
            nursery.cancel_scope.cancel()
    if relay.state is State.CONNECTED:
        return
    cause = relay.stats.last_end_cause
    if cause is None:
        raise ProbeFailed(f"not connected within {timeout:g} s")
    raise ProbeFailed(_failure(relay.stats.last_close_code, relay.stats.last_close_reason, cause))


def _failure(code: int | None, reason: str | None, cause: str) -> str:
    if code == AUTH_CLOSE_CODE:
        return f"the connector refused the upgrade: {code} {reason or ''}".rstrip() + (
            " (check --gateway-id and the secret)"
        )
    if code is not None:
        return f"{cause} with {code} {reason or ''}".rstrip()
    return f"dial failed: {cause}"


def _probe_command(args: argparse.Namespace) -> int:
    secret = args.secret or os.environ.get(SECRET_ENV)
    auth: UpgradeAuth | None = None
    try:
        if not args.timeout > 0:  # NaN fails this too
            raise ProbeFailed(f"--timeout must be a positive number of seconds, got {args.timeout}")
        if args.gateway_id:
            if not secret:
                raise ProbeFailed(f"--gateway-id needs a secret (--secret or ${SECRET_ENV})")
            try:
                check_gateway_id(args.gateway_id)
            except ValueError as exc:
                raise ProbeFailed(f"--gateway-id: {exc}") from None
            auth = UpgradeAuth(args.gateway_id, secret)
        identities = [Identity(p, b) for p, _, b in (s.partition(":") for s in args.platform)]
        _run_trio(
            lambda: _probe(
                args.url,
                auth=auth,
                identities=identities or [Identity("relay", "")],
                timeout=args.timeout,
                allow_insecure=args.allow_insecure,
                out=sys.stdout,
            )
        )
    except (ProbeFailed, ValueError, TypeError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if secret:
            text = text.replace(secret, "<secret>")
        print(f"probe failed: {text}", file=sys.stderr)
        return 1
    return 0


# --- the parser -----------------------------------------------------------------------


def _soak(argv: Sequence[str]) -> int:
    try:
        soak = import_benchmarks("soak")
    except ImportError as exc:
        print(f"trio-relay soak: unavailable ({exc})", file=sys.stderr)
        return 1
    return int(soak.main(list(argv)) or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-relay",
        description="trio_relay tools: benchmarks against the asyncio baseline, a "
        "reference connector to develop against, a probe for a real connector, and a "
        "check of a connector against the protocol.",
    )
    parser.add_argument("--version", action="version", version=f"trio-relay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    benchmarks: dict[str, str] = {}
    default = "compare"
    try:
        run = import_benchmarks("run")
        benchmarks, default = dict(run.BENCHMARKS), str(run.DEFAULT)
    except ImportError:
        pass  # not a checkout, or an extra is missing; `bench` itself will say so
    listing = "\n".join(f"  {name:<11} {text}" for name, text in benchmarks.items())
    bench = sub.add_parser(
        "bench",
        help="benchmarks: trio_relay beside the asyncio design and minimal Trio clients",
        description="Run benchmarks: trio_relay beside the asyncio design it replaces and "
        "the minimal Trio clients you would otherwise write, with the connector in a "
        "process of its own. Prints a summary first, details after, and writes plots.",
        epilog=f"benchmarks:\n{listing}\n  all         every one but cost, in this order"
        if listing
        else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument(
        "name",
        nargs="?",
        choices=[*benchmarks, "all"] if benchmarks else None,
        default=None,
        help=f"which benchmark (default: {default}; with --check: cost)",
    )
    bench.add_argument("--quick", action="store_true", help="fewer samples (about 15 s each)")
    bench.add_argument(
        "-n",
        type=int,
        default=None,
        metavar="N",
        help="main sample count (redial: drops per variant; inflight, detect, "
        "throughput: rounds; inbound: events; memory: relays)",
    )
    bench.add_argument("--json", metavar="PATH", help="write machine-readable results here")
    bench.add_argument(
        "--plot",
        metavar="DIR",
        help="write the plots (SVG) here (default: ./bench-plots; needs matplotlib, in the "
        "bench extra)",
    )
    bench.add_argument("--no-plot", action="store_true", help="write no plots")
    bench.add_argument(
        "--check",
        action="store_true",
        help="developers: print every target with its verdict, exit 1 if one is missed "
        "(without NAME: the counted targets of `cost`)",
    )
    bench.add_argument(
        "--update-reference",
        action="store_true",
        help="with `cost`: make this run's counts the reference the CI test holds the "
        "library to (benchmarks/cost_reference.json)",
    )
    bench.add_argument(
        "--markdown", metavar="PATH.md", help="write every target beside its figure, as Markdown"
    )
    bench.add_argument(
        "--pin",
        action="store_true",
        help="pin the connector to the last CPU and this process to the others (off by "
        "default: every message then wakes a process on another CPU, and any other load "
        "on either CPU lands on the figures)",
    )
    bench.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    bench.set_defaults(func=_bench)

    connector = sub.add_parser(
        "connector",
        help="serve the reference connector; write as its users from the terminal",
        description="Serve the reference connector (trio_relay.testing) until Ctrl-C, "
        "printing its URL, the test credentials a gateway needs, and every frame in one "
        "line. Lines on standard input act as the users: 'C1> hello' writes hello in chat "
        "C1, 'press C1 yes' presses option yes of the latest prompt in C1, 'stop C1' presses "
        "stop in C1, 'transcript C1' prints the chat, 'help' lists the rest.",
    )
    # Without the testing extra (a base install) _run answers `connector` before parsing.
    if _connector_missing() is None:
        from .testing._connector_command import add_arguments

        add_arguments(connector, secret_env=SECRET_ENV)
        connector.set_defaults(func=_connector)

    probe = sub.add_parser(
        "probe",
        help="dial a connector, handshake, print its descriptors and the ping RTT",
        description="Dial URL once, handshake, print the descriptors and the ping RTT. "
        "Exit 0 on success; 1 with a one-line reason otherwise. Never prints a secret.",
    )
    probe.add_argument("url", metavar="URL", help="the connector's base URL (http[s]/ws[s])")
    probe.add_argument("--gateway-id", help="authenticate as this gateway")
    probe.add_argument("--secret", help=f"the gateway's secret (better: ${SECRET_ENV})")
    probe.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    probe.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="NAME[:BOT]",
        help="identity to say hello as (repeatable; default relay)",
    )
    probe.add_argument(
        "--allow-insecure",
        action="store_true",
        help="allow plaintext ws:// to a host that is not loopback",
    )
    probe.set_defaults(func=_probe_command)

    conformance = sub.add_parser(
        "conformance",
        help="check a live connector against the protocol, clause by clause",
        description=textwrap.fill(
            "Connect to the connector at URL as a gateway that does everything by the "
            "book, and check the connector's side of docs/protocol.md clause by clause: "
            "one line per clause (pass; fail with what was seen against what the "
            "contract says; skip with the reason), then a summary line. Sends go only to "
            "--chat, and the delivery clauses ask you to write two messages there."
        ),
        epilog=conformance_command.epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conformance_command.add_arguments(conformance)
    conformance.set_defaults(func=lambda args: conformance_command.run(args, run_trio=_run_trio))

    sub.add_parser(
        "soak",
        help="chaos soak of every promise the relay makes (see trio-relay soak --help)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``trio-relay`` command; returns its exit status. Ctrl-C ends every
    command the same way: one line on standard error and status 130."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args_list)
    except BaseException as exc:
        if not _is_interrupt(exc):
            raise
        named = args_list and not args_list[0].startswith("-")
        program = f"trio-relay {args_list[0]}" if named else "trio-relay"
        print(f"{program}: interrupted", file=sys.stderr)
        return INTERRUPTED


def _run_trio(fn: Callable[[], Awaitable[T]]) -> T:
    # Ctrl-C is raised only where the main task waits: never half-way through a task's
    # step, where it would leave a coroutine unawaited (a warning on stderr) or a
    # structure half-updated.
    return trio.run(fn, restrict_keyboard_interrupt_to_checkpoints=True)


INTERRUPTED = 130
"""The exit status of a command ended by Ctrl-C (128 + SIGINT), as shells report it."""


def _is_interrupt(exc: BaseException) -> bool:
    # Ctrl-C may reach a task inside a nursery, which wraps it in a group (with the
    # Cancelled of its siblings): still an interrupt, never a traceback.
    if isinstance(exc, BaseExceptionGroup):
        interrupts, rest = exc.split(KeyboardInterrupt)
        return interrupts is not None and (rest is None or rest.split(trio.Cancelled)[1] is None)
    return isinstance(exc, KeyboardInterrupt)


def _run(args_list: list[str]) -> int:
    if args_list[:1] == ["soak"]:
        return _soak(args_list[1:])
    if args_list[:1] == ["connector"]:
        # A base install has no reference connector: whatever the arguments (its own
        # options are unknown then, and argparse would refuse them first), say which
        # extra it needs. The other commands still work.
        missing = _connector_missing()
        if missing is not None:
            return _unavailable("connector", missing)
    parser = _parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
