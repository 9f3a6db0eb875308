"""End-to-end latency: producer timestamp in the body -> the consumer has the message.

One worker process runs a :class:`~tubemq_aio.Producer` sending at a fixed offered rate (open
loop, as :mod:`~benchmarks.harness.latency`) and a :class:`~tubemq_aio.consumer.Consumer` of
a new group tailing the same topic with the not-found wait at 10 ms (the method note's setting
for every client). Each body starts with the message's **intended** send time
(``time.time_ns()`` scale, 8 bytes big-endian), so a stalled sender shows up as latency of every
message that should have left meanwhile (no coordinated omission). The consumer records
``time.time_ns() - stamp`` when a batch reaches the application (``getmany``), before acking.

Both ends share one clock (one process). They also share one event loop and one CPU: the CPU
figure is the producer's and the consumer's together.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from dataclasses import dataclass

from benchmarks.harness.latency import Histogram
from tubemq_aio import Producer
from tubemq_aio.consumer import Consumer

_STAMP = struct.Struct(">q")
#: Seconds the consumer keeps reading after the last send before giving up on the rest.
DRAIN_SECONDS = 10.0


@dataclass
class E2EResult:
    """Outcome of one end-to-end run (measured phase only, warm-up excluded)."""

    histogram: Histogram
    sent: int
    received: int
    send_errors: int
    first_error: str | None
    seconds: float
    warmup_sent: int
    duplicates: int


def stamped_body(size: int, stamp_ns: int) -> bytes:
    """A ``size``-byte body (at least 8) that starts with ``stamp_ns``."""
    return _STAMP.pack(stamp_ns) + b"x" * max(0, size - _STAMP.size)


def body_stamp(body: bytes) -> int:
    """The intended send time (ns) a body of :func:`stamped_body` carries."""
    return int(_STAMP.unpack_from(body)[0])


async def wait_assigned(consumer: Consumer, timeout: float, settle: float = 1.0) -> float:
    """Wait until the consumer holds partitions (then ``settle`` s more, so that its first
    fetches have set the start offsets); return the seconds it took."""
    t0 = time.perf_counter()
    while not consumer.assignment():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"no partition assigned within {timeout} s")
        await asyncio.sleep(0.02)
    await asyncio.sleep(settle)
    return time.perf_counter() - t0


async def run_e2e(
    producer: Producer,
    consumer: Consumer,
    topic: str,
    *,
    size: int,
    rate: float,
    seconds: float,
    warmup_seconds: float,
) -> E2EResult:
    """Send at ``rate`` msg/s for ``warmup_seconds + seconds``; record the end-to-end latency of
    every message sent in the measured part once the consumer receives it."""
    hist = Histogram()
    seen: set[int] = set()
    duplicates = 0
    errors = 0
    first: str | None = None
    clock = time.time_ns
    start_ns = clock()
    measure_ns = start_ns + int(warmup_seconds * 1e9)
    total = int(rate * (warmup_seconds + seconds))
    measured = total - int(rate * warmup_seconds)

    async def receive() -> None:
        nonlocal duplicates
        while len(seen) < measured:
            batch = await consumer.getmany(max_records=1000, timeout=0.5)
            now = clock()
            for msg in batch:
                stamp = body_stamp(msg.body)
                if stamp < measure_ns:
                    continue
                if stamp in seen:
                    duplicates += 1
                    continue
                seen.add(stamp)
                hist.record((now - stamp) / 1000)
            await batch.ack()

    async def one(body: bytes) -> None:
        nonlocal errors, first
        try:
            await producer.send(topic, body)
        except Exception as exc:
            errors += 1
            first = first or f"{type(exc).__name__}: {exc}"

    receiver = asyncio.ensure_future(receive())
    pending: set[asyncio.Task[None]] = set()
    step = 1e9 / rate
    for i in range(total):
        intended = start_ns + int(i * step)
        while (delay := (intended - clock()) / 1e9) > 0:  # noqa: ASYNC110 (never early)
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(one(stamped_body(size, intended)))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    sent_end = clock()
    with contextlib.suppress(TimeoutError):  # what did not arrive is reported as missing
        await asyncio.wait_for(receiver, DRAIN_SECONDS)
    return E2EResult(
        histogram=hist,
        sent=measured,
        received=len(seen),
        send_errors=errors,
        first_error=first,
        seconds=(sent_end - measure_ns) / 1e9,
        warmup_sent=total - measured,
        duplicates=duplicates,
    )
