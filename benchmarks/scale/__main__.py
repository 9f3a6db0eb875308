"""``python -m benchmarks.scale [--quick]``: the scale benchmark (:mod:`benchmarks.scale.run`)."""

from __future__ import annotations

import sys

from benchmarks.scale.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
