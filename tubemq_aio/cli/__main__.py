"""``python -m tubemq_aio.cli``: the same command-line tool as ``tubemq-aio`` and ``python -m
tubemq_aio`` (a reader who finds the tool in ``tubemq_aio/cli/`` may run it so)."""

from tubemq_aio.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
