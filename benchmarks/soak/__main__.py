"""``python -m trio_relay_benchmarks.soak``: the same as ``trio-relay soak``."""

import sys

from .cli import main

sys.exit(main())
