"""``make demo``: a real local TubeMQ cluster, a producer and a consumer, with visible output.

Run as ``python -m tubemq_aio.demo [--messages N]``. It starts a master and a broker from the
released server jars (see :mod:`tubemq_aio.testing`), sends messages with :class:`Producer`,
reads them back with ``async for`` over a :class:`Consumer`, prints what happened, and stops the
cluster again.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from tubemq_aio.consumer import Consumer
from tubemq_aio.producer import Producer
from tubemq_aio.testing import LocalCluster

__all__ = ["main", "run_demo"]

TOPIC = "demo"
#: Seconds the consumer may take to read everything back (group join included).
CONSUME_TIMEOUT = 180.0
#: The most messages ``--messages`` accepts.
MAX_MESSAGES = 10_000_000


def _say(text: str) -> None:
    print(text, flush=True)


async def run_demo(messages: int = 5000, concurrency: int = 64) -> int:
    """Produce and consume ``messages`` messages on a fresh local cluster.

    Args:
        messages: how many to send and read back (>= 1).
        concurrency: sending tasks.

    Returns:
        0 when every message came back, 1 otherwise.

    Raises:
        ValueError: ``messages`` or ``concurrency`` is below 1.
    """
    if messages < 1 or concurrency < 1:
        raise ValueError(f"messages and concurrency must be >= 1, got {messages}, {concurrency}")
    _say("starting a local TubeMQ cluster (master + broker, first run downloads the jars) ...")
    began = time.monotonic()
    async with LocalCluster(brokers=1, topics=[TOPIC], topic_partitions=3) as cluster:
        _say(f"cluster ready in {time.monotonic() - began:.0f} s; master at {cluster.master_addr}")

        async with Producer(cluster.master_addr, topics=[TOPIC]) as producer:
            started = time.monotonic()
            counter = iter(range(messages))

            async def sender() -> None:
                for i in counter:
                    await producer.send(
                        TOPIC,
                        f"message {i}".encode(),
                        attributes={"index": str(i)},
                        msg_type="even" if i % 2 == 0 else "odd",
                    )

            await asyncio.gather(*(sender() for _ in range(concurrency)))
            took = time.monotonic() - started
            _say(f"produced {messages} messages in {took:.2f} s ({messages / took:,.0f} msg/s)")

        by_partition: Counter[str] = Counter()
        by_type: Counter[str] = Counter()
        seen: set[int] = set()
        started = time.monotonic()
        async with Consumer(
            cluster.master_addr, group="demo-group", topics=[TOPIC], consume_from="earliest"
        ) as consumer:
            try:
                async with asyncio.timeout(CONSUME_TIMEOUT):
                    async for msg in consumer:
                        index = int(msg.attributes["index"])
                        if len(seen) < 3 and index not in seen:
                            _say(f"  got {msg.body!r} type={msg.msg_type} from {msg.partition_key}")
                        seen.add(index)
                        by_partition[msg.partition_key] += 1
                        by_type[msg.msg_type] += 1
                        if len(seen) == messages:
                            break
            except TimeoutError:
                _say(f"gave up waiting after {CONSUME_TIMEOUT:.0f} s")
        took = time.monotonic() - started
        _say(f"consumed {len(seen)} distinct messages in {took:.2f} s (including group join)")
        _say(f"  per partition: {dict(sorted(by_partition.items()))}")
        _say(f"  per msg_type:  {dict(sorted(by_type.items()))}")
    _say("cluster stopped")
    return 0 if len(seen) == messages else 1


def _message_count(text: str) -> int:
    """``--messages``: a whole number from 1 to 10⁷ (argparse reports anything else)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= count <= MAX_MESSAGES:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_MESSAGES}, got {count}")
    return count


def main() -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tubemq_aio.demo", description=__doc__)
    parser.add_argument(
        "--messages", type=_message_count, default=5000, help="messages to send (5000)"
    )
    args = parser.parse_args()
    return asyncio.run(run_demo(args.messages))


if __name__ == "__main__":
    raise SystemExit(main())
