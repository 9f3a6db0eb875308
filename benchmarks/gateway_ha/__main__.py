"""``python -m benchmarks.gateway_ha [--quick] [--seconds N]``; see docs/gateway.md."""

from __future__ import annotations

import sys

from benchmarks.gateway_ha.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
