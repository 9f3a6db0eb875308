"""``python -m tubemq_aio``: the same command-line tool as ``tubemq-aio``."""

from tubemq_aio.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
