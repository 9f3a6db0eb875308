"""Shared pieces of the command-line tool: exit codes, error lines, signals, input parsing."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator

from tubemq_aio.checks import Checks
from tubemq_aio.errors import InvalidMessageError
from tubemq_aio.protocol.attributes import attribute_block

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "error_line",
    "parse_attrs",
    "stop_on_signals",
]

PROG = "tubemq-aio"
EXIT_OK = 0
#: A runtime failure: unreachable master, refused or lost messages, a timeout.
EXIT_FAILURE = 1
#: Bad command line or input that could not be understood; nothing was sent.
EXIT_USAGE = 2
#: Ctrl-C (SIGINT) while a command connects or joins, or in ``partitions``/``lag``/``reset``
#: (128 + SIGINT, as a shell reports it); once reading, ``consume`` ends cleanly (0) and
#: ``produce`` reports the input it did not send (1).
EXIT_INTERRUPTED = 130


def error_line(problem: str) -> None:
    """Print ``tubemq-aio: error: <problem>`` as one line on stderr.

    Args:
        problem: what went wrong; newlines are folded so the message stays one line.
    """
    text = " ".join(str(problem).split())
    print(f"{PROG}: error: {text}", file=sys.stderr, flush=True)


def parse_attrs(items: list[str] | None) -> dict[str, str]:
    """Turn repeated ``--attr k=v`` options into a mapping.

    Args:
        items: the raw option values.

    Returns:
        ``key -> value`` (a later key wins).

    Raises:
        ConfigError: an item has no ``=`` or an empty key, or is an attribute no message may
            carry (a ``,`` or ``=`` in its value, a reserved ``$msgType$``/``$msgTime$``):
            a usage error before anything is read or sent, not a failure of every line.
    """
    checks = Checks("arguments")
    attrs: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            checks.problem(f"--attr {item!r}: expected KEY=VALUE")
            continue
        try:
            attribute_block("", "", ((key, value),))
        except InvalidMessageError as exc:
            checks.problem(f"--attr {item!r}: {exc}")
        attrs[key] = value
    checks.done()
    return attrs


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[list[int]]:
    """Set ``stop`` on SIGINT or SIGTERM instead of raising, for the duration of the block.

    Yields:
        A list that receives the numbers of the signals that arrived.
    """
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
    try:
        yield received
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
