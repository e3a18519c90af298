"""The benchmarks as a module (run with ``trio-relay bench``, which imports this directory
from the checkout as ``trio_relay_benchmarks``): the same as ``trio-relay bench``."""

from __future__ import annotations

import sys

from trio_relay.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
