"""``python -m benchmarks.chaos [--quick] [--out DIR]``; see docs/failures.md."""

from __future__ import annotations

import sys

from benchmarks.chaos.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
