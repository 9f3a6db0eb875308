"""Cookbook: a consumer worker that shuts down gracefully on SIGTERM (or Ctrl-C).

The worker takes one batch at a time (``getmany``), handles every message of it, acks it, and
only then looks at the stop flag: a signal never cuts a batch in half. It takes whole broker
batches (no ``max_records``): a part of a split batch is committed only together with the other
parts, so stopping between parts would hand the handled ones out again. Leaving the ``async
with`` closes the consumer, which commits what was acked and hands the partitions back to the
group (prefetched, unhandled batches are rolled back and come again to the next member).

Run it::

    python examples/consumer_worker.py --master 127.0.0.1:8715 --topic demo --group workers

It prints one JSON line per event (``batch``, ``done``, ``stopped``) so a supervisor or a test
can follow it. Guide: ``docs/cookbook/worker.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from typing import Any

from tubemq_aio import Consumer, Message


def emit(event: str, **fields: Any) -> None:
    """Print one event as a JSON line (flushed, so a pipe sees it at once)."""
    print(json.dumps({"event": event, **fields}), flush=True)


async def handle(msg: Message, work_seconds: float) -> None:
    """The application's work for one message (here: a short sleep standing in for it)."""
    await asyncio.sleep(work_seconds)


async def run(args: argparse.Namespace) -> int:
    """Consume until SIGTERM/SIGINT, or until ``--idle-exit`` seconds pass without a message
    after the first one."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    handled = 0
    idle_since: float | None = None  # the idle clock starts with the first batch
    async with Consumer(
        args.master, group=args.group, topics=[args.topic], consume_from="earliest"
    ) as consumer:
        while not stop.is_set():
            batch = await consumer.getmany(timeout=0.5)
            if not batch:
                idle = time.monotonic() - idle_since if idle_since is not None else 0.0
                if args.idle_exit and idle > args.idle_exit:
                    break
                continue
            emit("batch", partition=batch.partition_key, size=len(batch))
            for msg in batch:  # a stop request waits until the whole batch is handled
                await handle(msg, args.work_seconds)
            acked = await batch.ack()  # False: the lease expired, the batch comes again
            handled += len(batch)
            emit(
                "done",
                partition=batch.partition_key,
                acked=acked,
                bodies=[m.body.decode(errors="replace") for m in batch],
            )
            idle_since = time.monotonic()
    emit("stopped", handled=handled, signal=stop.is_set())
    return 0


def main() -> int:
    """Parse the command line and run the worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--master",
        default=os.environ.get("TUBEMQ_AIO_MASTER"),
        help="the master's HOST:PORT (default $TUBEMQ_AIO_MASTER)",
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--work-seconds", type=float, default=0.0, help="per message")
    parser.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        help="exit after this many idle seconds once work was seen (0: run until a signal)",
    )
    args = parser.parse_args()
    if not args.master:
        parser.error("give --master HOST:PORT or set $TUBEMQ_AIO_MASTER")
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
