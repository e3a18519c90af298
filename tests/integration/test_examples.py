"""The README's and the tutorial's examples run, so they cannot rot."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str) -> list[str]:
    """Run ``examples/<name>`` to its end; the lines it printed (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_quickstart_runs_end_to_end() -> None:
    lines = run_example("quickstart.py")
    assert lines[0] == "descriptor: Slack"
    assert lines[1].startswith("sent: True")
    assert "replied: True" in lines
    assert lines[-1] == "acked: ['buf-1'] stats: 1 delivered"


def test_the_quickstarts_handler_is_given_the_relay_and_closes_over_nothing() -> None:
    # It once closed over `relay` before `as relay` bound it: it worked, and read like a
    # bug. The handler takes the relay as its second argument instead.
    spec = importlib.util.spec_from_file_location("quickstart", EXAMPLES / "quickstart.py")
    assert spec is not None and spec.loader is not None
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    assert quickstart.handle.__code__.co_freevars == ()
    assert list(inspect.signature(quickstart.handle).parameters) == ["event", "relay"]


def test_the_tutorial_agent_streams_its_reply_into_the_chat() -> None:
    # docs/tutorial.md includes this file; the transcript is what the page shows.
    lines = run_example("tutorial_agent.py", "hello there")
    assert lines[0] == "U1 #u1: hello there"
    assert lines[1] == "bot typing"
    assert lines[2].startswith("bot send #m")
    assert all(line.startswith("bot edit #") for line in lines[3:-1])
    assert lines[-2].endswith(": You said: hello there")
    assert lines[-1] == "delivered: 1"


def test_the_live_card_agent_shows_a_task_card_and_seals_its_reply() -> None:
    # docs/tutorial.md ("Live cards and task cards") includes this file.
    lines = run_example("live_card_agent.py", "hello there")
    assert lines[0] == "U1 #u1: hello there"
    assert lines[1:3] == [
        "bot task_card: [in_progress: Read the question] [pending: Write the answer]",
        "bot task_card: [complete: Read the question] [in_progress: Write the answer]",
    ]
    drafts = lines[3:-3]
    assert drafts and all(line.startswith("bot draft {markdown_blocks}: ") for line in drafts)
    assert lines[-3].startswith("bot seal #m")
    assert lines[-3].endswith(" {markdown_blocks}: You said: hello there")
    assert lines[-2:] == [
        "bot task_card: [complete: Read the question] [complete: Write the answer]",
        "bot task_card_stop",
    ]


def test_the_anyio_agent_streams_the_models_answer_into_the_chat() -> None:
    # docs/how-to/anyio.md includes this file: AnyIO on the Trio backend, an httpx2 client.
    lines = run_example("anyio_agent.py", "hello there")
    assert lines[0] == "U1 #u1: hello there"
    assert lines[1] == "bot typing"
    assert lines[2].startswith("bot send #m")
    assert lines[-1].endswith(": You said: hello there")
