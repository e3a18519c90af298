"""The JSON codec on its own: µs to decode one result line and to encode one request
frame, with the pure path and with the ``speedups`` extra (trio_relay's own code around
each, as the relay runs it), beside the bare C libraries for reference::

    python -m trio_relay_benchmarks.codec_speed            # a table, min of 7 repeats
    python -m trio_relay_benchmarks.codec_speed --loop decode msgspec 20000

``--loop OP CODEC N`` runs one operation N times and nothing else, for an instruction
count (``valgrind --tool=callgrind``, two values of N, the difference divided by the
difference of N: the interpreter's start-up cancels out), where a shared machine's
seconds are too noisy. The implementations alternate within each repeat.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import timeit
from collections.abc import Callable
from typing import Any

from trio_relay._core.codec import PURE, FrameDecoder, JsonCodec, encode_wire, msgspec_codec
from trio_relay._core.frames import CONNECTOR_FRAMES

__all__ = ["main"]

RESULT_LINE = (
    b'{"type":"outbound_result","requestId":"6f1c0c1e6b3a4f0e9d8e7a6b5c4d3e2f",'
    b'"result":{"success":true,"message_id":"1712345678.000100"}}\n'
)
"""What a connector answers a request with (one line of a WebSocket message)."""
REQUEST: dict[str, Any] = {
    "type": "outbound",
    "requestId": "6f1c0c1e6b3a4f0e9d8e7a6b5c4d3e2f",
    "action": {"op": "send", "chat_id": "C0123456", "content": "a reply of a modest size"},
}
"""A request frame as the relay encodes it (``Outbound.to_wire()``)."""


def _codecs() -> dict[str, JsonCodec]:
    codecs = {"json": PURE}
    fast = msgspec_codec()
    if fast is not None:
        codecs["msgspec"] = fast
    return codecs


def _call(fn: Callable[..., object], *args: Any) -> Callable[[], object]:
    return functools.partial(fn, *args)


def _operations() -> dict[str, Callable[[], object]]:
    ops: dict[str, Callable[[], object]] = {}
    for name, codec in _codecs().items():
        decoder = FrameDecoder(CONNECTOR_FRAMES, codec=codec)
        ops[f"decode {name}"] = _call(decoder.feed, RESULT_LINE)
        ops[f"encode {name}"] = _call(encode_wire, REQUEST, codec)
    # The bare libraries, no trio_relay code around them: what the C parsers alone cost.
    for lib in ("msgspec", "orjson"):
        try:
            module = importlib.import_module(lib)
        except ImportError:
            continue
        if lib == "msgspec":
            dec, enc = module.json.Decoder().decode, module.json.Encoder().encode
        else:
            dec, enc = module.loads, module.dumps
        line = RESULT_LINE.rstrip(b"\n")
        ops[f"decode bare {lib}"] = _call(dec, line)
        ops[f"encode bare {lib}"] = _call(enc, REQUEST)
    return ops


def table(repeats: int = 7, number: int = 20_000) -> dict[str, float]:
    ops = _operations()
    best = {name: float("inf") for name in ops}
    for _ in range(repeats):
        for name, op in ops.items():  # interleaved: drift hits every row alike
            best[name] = min(best[name], timeit.timeit(op, number=number) / number * 1e6)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trio_relay_benchmarks.codec_speed")
    parser.add_argument("--loop", nargs=3, metavar=("OP", "CODEC", "N"))
    args = parser.parse_args(argv)
    if args.loop:
        op, codec, n = args.loop
        fn = _operations()[f"{op} {codec}"]
        for _ in range(int(n)):
            fn()
        return
    for name, us in table().items():
        print(f"{name:<22} {us:6.2f} µs")


if __name__ == "__main__":
    main()
