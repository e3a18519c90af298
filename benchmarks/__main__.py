"""``python -m trio_relay_benchmarks [NAME|all] [options]``: the same as ``trio-relay bench``."""

from __future__ import annotations

import sys

from trio_relay.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
