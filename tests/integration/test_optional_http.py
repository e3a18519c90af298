"""Neither HTTP family is a dependency of the relay: with both made unimportable, the
library, its connector and the relay still import and run, and the HTTP functions say
which extra to install."""

from __future__ import annotations

import subprocess
import sys

BLOCK_HTTP = """
import sys
for name in ("httpx", "httpcore", "httpx2", "httpcore2"):
    sys.modules[name] = None  # any import of it now raises ImportError
"""

RUN_A_RELAY = BLOCK_HTTP + """
import trio, trio_relay, trio_relay.http
from trio_relay.testing import open_connector

async def main():
    async with open_connector() as connector:
        async with trio_relay.open_relay(connector.url) as relay:
            await relay.wait_connected(timeout=10)
            out = await relay.request({"op": "send", "chat_id": "C1", "content": "hi"})
            assert out.success, out
    loaded = [m for m, mod in sys.modules.items() if mod and m.startswith(("httpx", "httpcore"))]
    assert not loaded, loaded
    print("ok")

trio.run(main)
"""

UPLOAD_MEDIA = BLOCK_HTTP + """
import trio, trio_relay
from trio_relay.testing import open_connector

async def main():
    async with open_connector() as connector:
        async with trio_relay.open_relay(connector.url) as relay:
            try:
                await relay.media.upload(b"x", "text/plain")
            except trio_relay.MediaError as exc:
                print(exc)

trio.run(main)
"""

ASK_FOR_A_CLIENT = BLOCK_HTTP + """
import trio_relay.http
try:
    trio_relay.http.llm_client()
except ImportError as exc:
    print(exc)
"""


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_relay_runs_without_any_http_family() -> None:
    assert _run(RUN_A_RELAY) == "ok"


def test_an_http_client_without_httpx2_names_the_extra() -> None:
    message = _run(ASK_FOR_A_CLIENT)
    assert "pip install 'trio_relay[httpx2]'" in message
    assert "from a checkout: pip install '.[httpx2]'" in message
    assert "trio_relay.http.httpx1.llm_client" in message


def test_media_without_httpx2_names_the_extra() -> None:
    message = _run(UPLOAD_MEDIA)
    assert "pip install 'trio_relay[httpx2]'" in message
    assert "from a checkout: pip install '.[httpx2]'" in message
