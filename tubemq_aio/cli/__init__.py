"""``tubemq-aio``: the command-line tool (also ``python -m tubemq_aio``).

Subcommands ``produce``, ``consume``, ``partitions``, ``lag``, ``reset``, ``topics``, ``groups`` and
``cluster``; run ``tubemq-aio --help`` for the options. Guide: ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys

from tubemq_aio.cli._common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, PROG, error_line
from tubemq_aio.cli._consume import run_consume
from tubemq_aio.cli._hints import master_hint
from tubemq_aio.cli._inspect import run_lag, run_partitions
from tubemq_aio.cli._listing import run_groups, run_topics
from tubemq_aio.cli._parser import parse_arguments
from tubemq_aio.cli._produce import run_produce
from tubemq_aio.cli._reset import run_reset
from tubemq_aio.errors import ConfigError, TubeMQError

__all__ = ["main"]

_COMMANDS = {
    "produce": run_produce,
    "consume": run_consume,
    "partitions": run_partitions,
    "lag": run_lag,
    "reset": run_reset,
    "topics": run_topics,
    "groups": run_groups,
}


def _configure_logging(verbose: int) -> None:
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    else:  # the client's warnings would break the one-line error contract
        logging.getLogger("tubemq_aio").addHandler(logging.NullHandler())
        logging.getLogger("tubemq_aio").propagate = False


def _run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_COMMANDS[args.command](args))
    except ConfigError as err:  # a bad argument or input file: nothing was sent
        error_line(str(err))
        return EXIT_USAGE
    except TubeMQError as err:
        error_line(f"{type(err).__name__}: {err}{master_hint(args, err)}")
        return EXIT_FAILURE
    except OSError as err:
        error_line(f"{type(err).__name__}: {err}")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        error_line("interrupted")
        return EXIT_INTERRUPTED


#: ``-v``/``-q`` as one word (``-v``, ``-vv``, ``-q``, ``-vq``) or spelled out.
_LOUDNESS = re.compile(r"-[vq]+|--verbose|--quiet")


def _cluster(argv: list[str]) -> int:
    """``tubemq-aio [-v|-q] cluster ... [-v|-q]``: the testing CLI, with the tool's ``-v`` (log)
    and ``-q`` (no progress lines) taken on either side of the command, as for the others."""
    from tubemq_aio.testing.cluster import main as cluster_main

    flags = [a for a in argv if _LOUDNESS.fullmatch(a)]
    rest = [a for a in argv if not _LOUDNESS.fullmatch(a)]
    verbose = sum(a.count("v") for a in flags)  # "--verbose" has one v, "--quiet" none
    quiet = any("q" in a for a in flags)  # "--verbose" has no q
    _configure_logging(verbose)
    return cluster_main(rest[rest.index("cluster") + 1 :], prog=f"{PROG} cluster", quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    """Run ``tubemq-aio``.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 runtime failure, 2 usage error, 130 interrupted (Ctrl-C
        while connecting, or in ``partitions``/``lag``/``reset``).
    """
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    if first == "cluster":
        return _cluster(argv)
    args = parse_arguments(argv)
    closed = _closed_stream(args)
    if closed is not None:
        error_line(closed)
        return EXIT_USAGE
    _configure_logging(args.verbose)
    code = _run(args)
    try:
        if sys.stdout is not None:  # produce runs without one
            sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader left; do not fail at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _closed_stream(args: argparse.Namespace) -> str | None:
    """What to say when the command needs a standard stream the process was started without
    (``tubemq-aio consume ... >&-``, ``tubemq-aio produce ... <&-``), else None. Python sets
    such a stream to None; without this check the command failed with a traceback (a consume
    would have had nowhere to print what it acks)."""
    if args.command == "produce":  # prints to stderr only
        if args.input == "-" and sys.stdin is None:
            return "standard input is closed: give FILE, or pipe the lines in"
        return None
    if sys.stdout is None:
        return "standard output is closed: run the command with it open (e.g. `> FILE`)"
    return None
