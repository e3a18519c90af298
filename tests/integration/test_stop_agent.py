"""The how-to's example (examples/stop_agent.py): an LLM's answer streamed through
``llm_client()`` and the real openai SDK from a local fake provider that stalls
mid-answer; the user presses stop, the turn ends, the agent says so."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fake_provider import STALL_AFTER, WORDS, ProviderServer, serve_provider
from http_servers import PROXY_VARIABLES

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "stop_agent.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_stop_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


agent = load_example()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in PROXY_VARIABLES:  # the machine's proxies must not capture loopback
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with serve_provider() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


async def test_a_stalled_answer_is_stopped_by_its_user(provider: ProviderServer) -> None:
    # "stall": two words, then the provider holds the stream open and sends nothing;
    # only the user's stop ends this turn.
    lines = (await agent.demo("Tell me a long story", model="stall")).splitlines()
    assert lines[0] == "U1 #u1: Tell me a long story"
    stop = lines.index("U1 [stop]")
    # Before the stop, the words the model sent were on screen, and nothing else.
    shown = [line.split(": ", 1)[1] for line in lines[1:stop]
             if line.startswith(("bot send", "bot edit"))]
    assert shown and all("".join(WORDS[:STALL_AFTER]).startswith(text) for text in shown)
    assert lines[-1].startswith("bot send #") and lines[-1].endswith(": Stopped.")
