"""A throwaway ``redis-server`` for the benchmarks: a free loopback port, a temporary
directory, nothing saved to disk; ``None`` when ``redis-server`` is not installed.
``TRIO_RELAY_BENCH_REDIS=redis://...`` uses a server of your own instead."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["redis_url"]


@contextmanager
def redis_url() -> Iterator[str | None]:
    given = os.environ.get("TRIO_RELAY_BENCH_REDIS")
    if given:
        yield given
        return
    server = shutil.which("redis-server")
    if server is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="trio-relay-bench-redis-") as directory:
        proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)
