"""One member of a consumer group in its own OS process (for ``test_consumer_group_procs.py``).

Usage: ``python _group_member.py MASTER GROUP TOPIC OUT_FILE [HOLD_SECONDS]``

Consumes ``TOPIC`` as a member of ``GROUP`` (``consume_from="earliest"``) and writes what
happens to ``OUT_FILE`` as JSON lines, each flushed at once (so a SIGKILL loses at most the line
being written). ``t`` is ``time.time()``; message ids are the numbers in the bodies
(``b"m-000042"`` is 42):

* ``{"e": "start", "pid": ...}`` and ``{"e": "registered"}`` after ``start()``;
* ``{"e": "assigned" | "revoked", "keys": [...]}`` from the rebalance listener;
* ``{"e": "recv", "pk": key, "ids": [...]}`` when a batch is taken, **before** it is acked
  (the member then "works" ``HOLD_SECONDS``, default 0, before acking it);
* ``{"e": "ack", "pk": key, "ok": bool}`` after the ack (``ok`` False: the lease was gone);
* ``{"e": "closing"}`` / ``{"e": "closed"}`` around a graceful close, which SIGTERM triggers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from typing import IO, Any

from tubemq_aio.consumer import Consumer

HEARTBEAT = 2.0  # seconds; the test master balances every 2 s


def message_id(body: bytes) -> int:
    """The number a test producer put into ``body`` (``b"m-000042"`` -> 42)."""
    return int(body.split(b"-", 1)[1])


class Recorder:
    """Appends one flushed JSON line per event to an open file."""

    def __init__(self, out: IO[str]) -> None:
        """Write to ``out``."""
        self.out = out

    def __call__(self, event: str, **fields: Any) -> None:
        """Record ``event`` with ``fields`` and the current wall-clock time."""
        self.out.write(json.dumps({"e": event, "t": time.time(), **fields}) + "\n")
        self.out.flush()


async def run(master: str, group: str, topic: str, out: IO[str], hold: float = 0.0) -> None:
    """Consume until SIGTERM, recording every batch; then close gracefully."""
    record = Recorder(out)
    record("start", pid=os.getpid())
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    consumer = Consumer(
        master,
        group=group,
        topics=[topic],
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
        on_assigned=lambda keys: record("assigned", keys=sorted(keys)),
        on_revoked=lambda keys: record("revoked", keys=sorted(keys)),
    )
    await consumer.start()
    record("registered")
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout=0.2)
            if not batch:
                continue
            record("recv", pk=batch.partition_key, ids=[message_id(m.body) for m in batch])
            if hold:
                await asyncio.sleep(hold)
            ok = await batch.ack()
            record("ack", pk=batch.partition_key, ok=ok)
    finally:
        record("closing")
        await consumer.close()
        record("closed")


def main() -> None:
    """Entry point: ``MASTER GROUP TOPIC OUT_FILE [HOLD_SECONDS]``."""
    master, group, topic, path = sys.argv[1:5]
    hold = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    with open(path, "a", encoding="utf-8") as out:
        asyncio.run(run(master, group, topic, out, hold))


if __name__ == "__main__":
    main()
