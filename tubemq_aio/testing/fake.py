"""The in-memory :class:`FakeCluster` as a process of its own: a TubeMQ to try the SDK without Java.

``tubemq-aio cluster up --fake [--topic demo:3] [--port 8715]`` (or ``python -m
tubemq_aio.testing.fake up ...``) starts a fake master and broker in this process, prints the
master address in the format of the real ``cluster up``, writes the same state file, and runs in
the foreground until Ctrl-C, SIGTERM or ``tubemq-aio cluster down`` (from another shell).

It is a **fake**: messages live in this process's memory only (gone when it stops), one process
plays every node, nothing is durable and the server-side limits of a real TubeMQ are not
enforced. It speaks the real wire protocol, so the code you write against it runs unchanged
against a real cluster (``docs/local-cluster.md``).
"""

from __future__ import annotations

import sys

from tubemq_aio.testing._cli import main as cluster_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m tubemq_aio.testing.fake [up] [OPTIONS] | down | status`` (``up`` is ``--fake``).

    Returns:
        Process exit code.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):  # options only: `up` is meant
        args.insert(0, "up")
    if args[0] == "up":
        args.insert(1, "--fake")
    return cluster_main(args, prog="python -m tubemq_aio.testing.fake")


if __name__ == "__main__":  # pragma: no cover - exercised through the CLI tests
    raise SystemExit(main())
