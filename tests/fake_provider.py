"""A fake LLM provider speaking the streaming formats of the OpenAI and Anthropic APIs.

Runs on another stack than the client under test (stdlib ``http.server``): in a thread
for loopback tests (:func:`serve_provider`), or as a script in a network namespace
(``python fake_provider.py HOST`` prints its port), which is why it imports nothing of
the tests. The model name picks the behaviour:

* ``"normal"``: the whole stream, the text ``WORDS`` in one delta per word, then the end.
* ``"stall"``: the first two deltas, then silence with the connection held open (a
  provider stuck mid-generation), until the server is shut down.
* ``"slow"``: the whole stream, with a pause of ``SLOW_PAUSE`` seconds after the first
  two deltas (a model thinking mid-answer: alive, but sending nothing).

Every request body is recorded in ``server.requests`` (parsed JSON), its headers in
``server.headers``.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

WORDS = ["Hello", ", ", "relay", " world", "!"]
TEXT = "".join(WORDS)
STALL_AFTER = 2
SLOW_PAUSE = 2.5


def openai_events(deltas: list[str], *, finished: bool) -> Iterator[bytes]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "normal"}  # fmt: skip
    first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    yield _data({**base, "choices": [first]})
    for delta in deltas:
        choice = {"index": 0, "delta": {"content": delta}, "finish_reason": None}
        yield _data({**base, "choices": [choice]})
    if finished:
        yield _data({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        yield b"data: [DONE]\n\n"


def anthropic_events(deltas: list[str], *, finished: bool) -> Iterator[bytes]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "normal",
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 3, "output_tokens": 0}}  # fmt: skip
    yield _event("message_start", {"type": "message_start", "message": message})
    block = {"type": "text", "text": ""}
    yield _event("content_block_start",
                 {"type": "content_block_start", "index": 0, "content_block": block})  # fmt: skip
    yield _event("ping", {"type": "ping"})
    for delta in deltas:
        text = {"type": "text_delta", "text": delta}
        yield _event("content_block_delta",
                     {"type": "content_block_delta", "index": 0, "delta": text})  # fmt: skip
    if finished:
        yield _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                       "usage": {"output_tokens": len(deltas)}})  # fmt: skip
        yield _event("message_stop", {"type": "message_stop"})


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\n".encode() + _data(payload)


class ProviderHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProviderServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.server.requests.append(body)
        self.server.headers.append(dict(self.headers))
        stall = body.get("model") == "stall"
        deltas = WORDS[:STALL_AFTER] if stall else WORDS
        if self.path.endswith("/chat/completions"):
            events = openai_events(deltas, finished=not stall)
        elif self.path.endswith("/messages"):
            events = anthropic_events(deltas, finished=not stall)
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        slow = body.get("model") == "slow"
        for index, event in enumerate(events):
            # (OpenAI's event 0 is the role-only chunk: the pause follows two deltas.)
            if slow and index == STALL_AFTER + 1:
                time.sleep(SLOW_PAUSE)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        if stall:
            self.server.stopping.wait()
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ProviderServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str) -> None:
        super().__init__((host, 0), ProviderHandler)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextlib.contextmanager
def serve_provider(host: str = "127.0.0.1") -> Iterator[ProviderServer]:
    server = ProviderServer(host)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()  # releases stalled streams
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    provider = ProviderServer(sys.argv[1])
    print(provider.server_address[1], flush=True)
    provider.serve_forever()
