"""``python -m benchmarks [--quick] ...``: run the benchmark harness (see docs/benchmarks.md)."""

from __future__ import annotations

import sys

from benchmarks.harness.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
