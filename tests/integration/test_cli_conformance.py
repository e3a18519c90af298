"""``trio-relay conformance`` as a connector author runs it: a real ``trio-relay
connector`` process (``--ops all`` and ``--ops legacy``), the check in another process,
and a person who writes in the chat when the check asks (here: this test, on the
connector's console)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_relay.conformance import CLAUSES

CLI = [sys.executable, "-m", "trio_relay.cli"]
SECRET_VAR = "CONFORMANCE_TEST_SECRET"


class Lines:
    """A process's output, line by line as it comes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.seen: list[str] = []
        self._partial = b""

    async def next(self) -> str | None:
        """The next line; ``None`` at the end of the output."""
        while b"\n" not in self._partial:
            chunk = await self.stream.receive_some()
            if not chunk:
                return None
            self._partial += chunk
        line, _, self._partial = self._partial.partition(b"\n")
        self.seen.append(line.decode())
        return self.seen[-1]

    async def until(self, prefix: str) -> str:
        while (line := await self.next()) is not None:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise AssertionError(f"no line starting {prefix!r} in {self.seen}")


async def run_against_the_reference_connector(
    ops: str, tmp_path: Path, *extra: str
) -> tuple[int, list[str], list[str], dict[str, object]]:
    """Serve ``trio-relay connector --ops OPS``, check it with ``trio-relay conformance
    --chat C1``; the exit status, the report's lines, the prompts, the JSON report."""
    connector = await trio.lowlevel.open_process(
        [*CLI, "connector", "--quiet", "--ops", ops],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert connector.stdout is not None and connector.stdin is not None
        banner = Lines(connector.stdout)
        url = await banner.until("url: ")
        gateway_id = await banner.until("gateway id: ")
        secret = await banner.until("secret: ")
        report_path = tmp_path / "report.json"
        check = await trio.lowlevel.open_process(
            [
                *CLI,
                "conformance",
                url,
                "--gateway-id",
                gateway_id,
                "--secret-env",
                SECRET_VAR,
                "--chat",
                "C1",
                "--json",
                str(report_path),
                "--settle",
                "0.3",
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, SECRET_VAR: secret},
        )
        assert check.stdin is not None and check.stdout is not None and check.stderr is not None
        prompts = Lines(check.stderr)
        with trio.fail_after(60):
            # The person: writes in C1 (on the connector's console) when asked, then
            # presses Enter in the check's terminal.
            while (prompt := await prompts.next()) is not None:
                if prompt.startswith("conformance: write a message in chat C1"):
                    await connector.stdin.send_all(b"C1> checking the connector\n")
                    await check.stdin.send_all(b"\n")
            report = Lines(check.stdout)
            while await report.next() is not None:
                pass
            status = await check.wait()
        assert secret not in "\n".join(report.seen + prompts.seen)
        return status, report.seen, prompts.seen, json.loads(report_path.read_text())
    finally:
        connector.kill()
        with trio.fail_after(10):
            await connector.wait()


async def test_the_reference_connector_with_every_op_conforms(tmp_path: Path) -> None:
    status, lines, prompts, data = await run_against_the_reference_connector("all", tmp_path)
    assert status == 0, lines
    assert len(prompts) == 2, prompts
    assert all(len(line) <= 100 for line in lines), lines
    firsts = [line for line in lines[:-1] if not line.startswith(" ")]  # not continuations
    assert [line.split()[1].rstrip(":") for line in firsts] == [c.id for c in CLAUSES]
    verdicts = {line.split()[1].rstrip(":"): line.split()[0] for line in firsts}
    # trio-relay connector's platform streams no live cards, and keeps no keys.
    skipped = {"drafts.seal", "idempotency.keys"}
    assert verdicts == {c.id: "SKIP" if c.id in skipped else "PASS" for c in CLAUSES}, lines
    assert lines[-1].endswith("14 clauses, 12 passed, 0 failed, 2 skipped: no clause failed")
    assert data["ok"] is True and data["failed"] == 0 and data["passed"] == 12


async def test_the_reference_connector_with_the_legacy_ops_conforms(tmp_path: Path) -> None:
    status, lines, _, data = await run_against_the_reference_connector("legacy", tmp_path)
    assert status == 0, lines
    ops = next(line for line in lines if line.startswith("PASS ops.results"))
    assert "typing, send, edit, follow_up conform" in ops
    assert data["ok"] is True and data["failed"] == 0


async def test_only_checks_the_named_clauses(tmp_path: Path) -> None:
    status, lines, prompts, data = await run_against_the_reference_connector(
        "legacy", tmp_path, "--only", "ping", "close.codes"
    )
    assert status == 0 and not prompts
    assert [line.split()[1].rstrip(":") for line in lines[:-1]] == [
        "upgrade.accepts",
        "close.codes",
        "ping",
    ]
    assert [c["clause"] for c in data["clauses"]] == ["upgrade.accepts", "close.codes", "ping"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--secret-env", "CONFORMANCE_UNSET_VAR"], "$CONFORMANCE_UNSET_VAR is not set"),
        (["--secret-env", SECRET_VAR, "--timeout", "0"], "--timeout must be a positive"),
        (["--secret-env", SECRET_VAR, "--gateway-id", "a:b"], "gateway id must be non-empty"),
    ],
)
def test_a_usage_mistake_is_refused_with_status_2(argv: list[str], message: str) -> None:
    args = ["http://127.0.0.1:9", "--gateway-id", "gw", *argv]
    done = subprocess.run(
        [*CLI, "conformance", *args],
        capture_output=True,
        text=True,
        env={**os.environ, SECRET_VAR: "s"},
        timeout=30,
    )
    assert done.returncode == 2, done
    assert message in done.stderr and done.stdout == ""


def test_an_unreachable_connector_fails_the_first_clause_and_skips_the_rest() -> None:
    done = subprocess.run(
        [
            *CLI,
            "conformance",
            "http://127.0.0.1:9",
            "--gateway-id",
            "gw",
            "--secret-env",
            SECRET_VAR,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, SECRET_VAR: "a-secret"},
        timeout=30,
    )
    assert done.returncode == 1, done
    lines = done.stdout.splitlines()
    assert lines[0].startswith("FAIL upgrade.accepts")
    assert "dial failed" in done.stdout.split("contract:")[0]
    verdicts = [line for line in lines[:-1] if not line.startswith(" ")]
    assert verdicts[0].startswith("FAIL upgrade.accepts")
    assert all(line.startswith("SKIP") for line in verdicts[1:]), lines
    assert all(len(line) <= 100 for line in lines), lines
    assert lines[-1].endswith("0 passed, 1 failed, 13 skipped: 1 of them failed"), lines[-1]


def test_help_lists_every_clause() -> None:
    done = subprocess.run(
        [*CLI, "conformance", "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    for c in CLAUSES:
        assert c.id in done.stdout
    assert "--secret-env VAR" in done.stdout and "exit status: 0" in done.stdout


def test_ctrl_c_ends_the_check_with_one_line_and_status_130() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(60)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        process = subprocess.Popen(
            [
                *CLI,
                "conformance",
                url,
                "--gateway-id",
                "gw",
                "--secret-env",
                SECRET_VAR,
                "--timeout",
                "600",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, SECRET_VAR: "a-secret"},
        )
        try:
            # The check is inside its first dial: connected, waiting for an upgrade
            # answer that never comes. Ctrl-C goes to the process group, as a terminal's.
            accepted = listener.accept()[0]
            os.killpg(process.pid, signal.SIGINT)
            out, err = process.communicate(timeout=60)
            accepted.close()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
    assert process.returncode == 130
    assert (out, err) == ("", "trio-relay conformance: interrupted\n")
