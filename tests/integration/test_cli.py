"""The ``trio-relay`` command: help everywhere, ``connector`` and ``probe`` for real.

``connector`` runs as a subprocess (exactly as a user starts it); ``probe`` runs
in-process through ``main()`` so its output and exit code can be checked directly.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata

import pytest

import trio_relay
from trio_relay.cli import main

PYTHON_CLI = [sys.executable, "-m", "trio_relay.cli"]


@pytest.mark.parametrize(
    "argv", [["--help"], ["bench", "--help"], ["connector", "--help"], ["probe", "--help"]]
)
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: trio-relay")


def test_bench_help_lists_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    for name in ("redial", "inflight", "detect", "throughput", "inbound", "memory", "all"):
        assert name in out
    assert "--quick" in out and "--json" in out and "--plot" in out
    assert "--tiny" not in out  # the test suite's knob stays out of the way


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    # Defined once (trio_relay.__version__); the installed metadata and the command agree.
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"trio-relay {trio_relay.__version__}\n"
    assert metadata.version("trio_relay") == trio_relay.__version__


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: trio-relay" in capsys.readouterr().err


def test_the_console_script_is_installed() -> None:
    script = os.path.join(os.path.dirname(sys.executable), "trio-relay")
    assert os.path.exists(script), "pip install -e . puts trio-relay beside the interpreter"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "bench" in done.stdout


# --- a connector started the way a user starts it --------------------------------------


@dataclass
class Served:
    url: str
    lines: dict[str, str]
    output: str
    reader: threading.Thread


def _read_banner(process: subprocess.Popen[str], timeout: float = 20) -> Served:
    assert process.stdout is not None
    stdout = process.stdout
    lines: queue.Queue[str] = queue.Queue()
    # A reader thread, because a pipe's buffered lines are invisible to select().

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    fields: dict[str, str] = {}
    output = ""
    while "serving" not in output:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no banner within {timeout} s: {output!r}") from None
        output += line
        key, _, value = line.partition(": ")
        fields[key.strip()] = value.strip()
    return Served(fields["url"], fields, output, reader)


@pytest.fixture
def connector() -> Iterator[Served]:
    process = subprocess.Popen(
        [*PYTHON_CLI, "connector", "--port", "0", "--gateway-id", "gw-test"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TRIO_RELAY_SECRET": "s3cret-for-tests"},
    )
    reader = None
    try:
        served = _read_banner(process)
        reader = served.reader
        yield served
    finally:
        process.terminate()
        process.wait(10)
        if reader is not None:
            reader.join(10)  # it ends at EOF, once the process is gone
        assert process.stdout is not None
        process.stdout.close()


def test_connector_prints_url_and_credentials(connector: Served) -> None:
    assert connector.url.startswith("http://127.0.0.1:")
    assert connector.lines["websocket"] == connector.url.replace("http", "ws", 1) + "/relay"
    assert connector.lines["gateway id"] == "gw-test"
    assert connector.lines["secret"] == "s3cret-for-tests"


def test_probe_succeeds(
    connector: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIO_RELAY_SECRET", "s3cret-for-tests")
    code = main(["probe", connector.url, "--gateway-id", "gw-test", "--platform", "slack:B1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "connected to ws://127.0.0.1:" in out
    assert "platform slack" in out
    assert "ping RTT:" in out
    assert "s3cret-for-tests" not in out + err


def test_probe_with_a_wrong_secret_fails_in_one_line(
    connector: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["probe", connector.url, "--gateway-id", "gw-test", "--secret", "wrong-one"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("probe failed:")
    assert "4401" in err
    assert "wrong-one" not in err


def test_probe_against_a_closed_port_fails_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        started = time.monotonic()
        code = main(["probe", f"http://127.0.0.1:{port}", "--timeout", "10"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("probe failed:")
    assert "connect" in err.lower()
    assert time.monotonic() - started < 5, "one refused dial is the answer; no waiting"


def test_probe_refuses_plaintext_to_a_remote_host(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "http://192.0.2.1:9", "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("probe failed:") and "plaintext" in err
    # The hint names the command's own flag, not the library's config.
    assert "--allow-insecure" in err and "RelayConfig" not in err


def test_probe_needs_a_secret_with_a_gateway_id(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIO_RELAY_SECRET", raising=False)
    assert main(["probe", "http://127.0.0.1:9", "--gateway-id", "gw"]) == 1
    assert "secret" in capsys.readouterr().err


def test_probe_subprocess_exit_code(connector: Served) -> None:
    """The real entry point's exit status (what scripts and health checks see)."""
    done = subprocess.run(
        [*PYTHON_CLI, "probe", connector.url, "--gateway-id", "gw-test"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TRIO_RELAY_SECRET": "s3cret-for-tests"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "platform relay" in done.stdout


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--timeout", "0"], "--timeout"),
        (["--timeout", "nan"], "--timeout"),
        (["--gateway-id", "g:w", "--secret", "s"], "--gateway-id"),
    ],
)
def test_probe_argument_errors_name_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert main(["probe", "http://127.0.0.1:9", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"probe failed: {flag}") and "RelayConfig" not in err
    assert err.count("\n") == 1
