"""The example agents (examples/streaming_agent.py, examples/stop_agent.py): an LLM's
streamed answer, through ``llm_client()`` and the real openai SDK from a local fake
provider, streamed into a chat of the reference connector with ``stream_reply``, and
stopped by its user."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fake_provider import STALL_AFTER, TEXT, WORDS, ProviderServer, serve_provider
from http_servers import PROXY_VARIABLES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "streaming_agent.py"


def load_example(path: Path = EXAMPLE) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


agent = load_example()
stop_agent = load_example(EXAMPLES / "stop_agent.py")


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in PROXY_VARIABLES:  # the machine's proxies must not capture loopback
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with serve_provider() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


async def test_the_answer_is_streamed_into_the_chat(provider: ProviderServer) -> None:
    transcript = await agent.demo("Say hello", model="normal")
    lines = transcript.splitlines()
    assert lines[0] == "U1 #u1: Say hello"
    # Typing until the first token, which is sent at once; the rest arrives by edits
    # of that message, the last of which shows the whole answer.
    assert lines[1] == "bot typing"
    said = [line for line in lines[1:] if line != "bot typing"]
    assert said[0].startswith("bot send #m")
    first = said[0].split(": ", 1)[1]  # what had arrived when the send went out
    assert first.startswith(WORDS[0]) and TEXT.startswith(first)
    assert said[-1].endswith(f": {TEXT}")
    assert all(line.startswith("bot edit #") for line in said[1:])
    assert provider.requests[0]["stream"] is True
    assert provider.requests[0]["messages"] == [{"role": "user", "content": "Say hello"}]


def test_the_example_runs_as_a_script(provider: ProviderServer) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "Say", "hello"],
        capture_output=True, text=True, timeout=120, env=os.environ.copy(), check=False,
    )  # fmt: skip
    # The script asks for gpt-4o-mini, which the fake provider streams like "normal".
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "U1 #u1: Say hello"
    assert done.stdout.splitlines()[-1].endswith(f": {TEXT}")


async def test_a_stalled_answer_is_stopped_by_its_user(provider: ProviderServer) -> None:
    # "stall": two words, then the provider holds the stream open and sends nothing;
    # only the user's stop ends this turn.
    lines = (await stop_agent.demo("Tell me a long story", model="stall")).splitlines()
    assert lines[0] == "U1 #u1: Tell me a long story"
    stop = lines.index("U1 [stop]")
    # Before the stop, the words the model sent were on screen, and nothing else.
    shown = [line.split(": ", 1)[1] for line in lines[1:stop]
             if line.startswith(("bot send", "bot edit"))]
    assert shown and all("".join(WORDS[:STALL_AFTER]).startswith(text) for text in shown)
    assert lines[-1].startswith("bot send #") and lines[-1].endswith(": Stopped.")
