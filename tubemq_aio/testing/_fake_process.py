"""Serving the in-memory :class:`FakeCluster` in the foreground: the body of ``cluster up --fake``
(:mod:`tubemq_aio.testing.fake` is the entry point)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from tubemq_aio.testing._fake_cluster import FakeCluster
from tubemq_aio.testing._state import FAKE_KIND, state_file
from tubemq_aio.testing._topics import MASTER_TOPIC_NAME, MAX_TOPIC_PARTITIONS
from tubemq_aio.testing._up_report import fake_up_lines

__all__ = [
    "DEFAULT_PORT",
    "FAKE_NOTICE",
    "add_fake_arguments",
    "parse_topic",
    "run_fake",
]

#: The master port a fake listens on unless ``--port`` says otherwise (TubeMQ's usual port).
DEFAULT_PORT = 8715
#: Printed by ``up --fake`` so that nobody mistakes the fake for a TubeMQ.
FAKE_NOTICE = (
    "FAKE TubeMQ: in memory, one process, no Java; messages are lost when it stops. For trying "
    "the SDK and for tests, not for durability. Stop it with Ctrl-C or `tubemq-aio cluster down`."
)


def parse_topic(spec: str) -> tuple[str, int]:
    """``NAME[:PARTITIONS]`` (default 3 partitions) as ``(name, partitions)``.

    The name must be one the real master creates (a letter, then 1 to 63 letters, digits or
    ``_``), for the fake too: a name only the fake took would fail on the real cluster.

    Raises:
        argparse.ArgumentTypeError: such a name it is not, or the partition count is not
            1..1000 (``MAX_TOPIC_PARTITIONS``).
    """
    name, _, parts = spec.partition(":")
    try:
        count = int(parts) if parts else 3
    except ValueError:
        raise argparse.ArgumentTypeError(f"{spec!r}: partitions must be an integer") from None
    if not name or not 1 <= count <= MAX_TOPIC_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"{spec!r}: expected NAME[:PARTITIONS], 1..{MAX_TOPIC_PARTITIONS}"
        )
    if not MASTER_TOPIC_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"{name!r}: a TubeMQ master takes topic names of 2 to 64 characters, a letter "
            "then letters, digits or _"
        )
    return name, count


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0..65535)")
    return port


def add_fake_arguments(parser: argparse.ArgumentParser) -> None:
    """The ports of ``up`` and ``up --fake`` (``--topic`` is shared too)."""
    parser.add_argument(
        "--port",
        type=_port,
        help=f"master port (default {DEFAULT_PORT}: the real cluster takes a free one when "
        f"{DEFAULT_PORT} is in use, the fake fails; 0 picks a free one)",
    )
    parser.add_argument(
        "--web-port",
        type=_port,
        help="the real master's web API port (default 8080, or a free one when 8080 is in use)",
    )


def describe(cluster: FakeCluster, topics: list[tuple[str, int]], took: float) -> dict[str, Any]:
    """The state-file description of a running fake (the real ``up``'s keys, plus ``kind``)."""
    return {
        "kind": FAKE_KIND,
        "master_addr": cluster.master_addr,
        "topics": [name for name, _ in topics],
        "nodes": [{"name": "fake", "pid": os.getpid(), "addr": cluster.master_addr}],
        "log_dir": "-",
        "work_dir": "",
        "bring_up_seconds": round(took, 2),
    }


async def run_fake(topics: list[tuple[str, int]], port: int, brokers: int = 1) -> int:
    """Serve a fake cluster (``brokers`` brokers, every topic on each) until SIGINT/SIGTERM;
    save and remove the state file around it.

    Returns:
        0 after a clean stop, 1 when the port is taken.
    """
    began = time.monotonic()
    cluster = FakeCluster(dict(topics), brokers=brokers)
    try:
        await cluster.start(master_port=port)
    except OSError as err:
        await cluster.stop()
        print(
            f"fake cluster failed to start on port {port}: {err.strerror} (give a free one with "
            "--port PORT, or --port 0 for any)",
            file=sys.stderr,
        )
        return 1
    info = describe(cluster, topics, time.monotonic() - began)
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2), encoding="utf-8")
    for line in fake_up_lines(info, path):
        print(line)
    print(FAKE_NOTICE, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await cluster.stop()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text(encoding="utf-8")).get("nodes") == info["nodes"]:
                path.unlink()
    print("fake cluster stopped", flush=True)
    return 0
