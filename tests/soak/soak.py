"""Soak: produce and consume at a fixed rate against a real local TubeMQ cluster for a while,
sampling the process's RSS, open file descriptors and asyncio tasks; they must stay flat.

    python tests/soak/soak.py --minutes 10 --rate 200 --out soak.json

Flat means: after a warm-up (the first fifth of the run), the largest sample of each series is
at most 10 % above the first one (file descriptors and tasks: the same count, with a slack of
two for connections being replaced). Every acknowledged message must have been consumed by the
end. Exit status 0 when both hold, 1 otherwise. `make soak` runs it (MINUTES=N for shorter).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field

from tubemq_aio import Consumer, Producer, SendResult, TubeMQError
from tubemq_aio.testing import LocalCluster

TOPIC = "soak"
SAMPLE_EVERY = 10.0


@dataclass
class Sample:
    """One measurement."""

    t: float
    rss_kib: int
    fds: int
    tasks: int
    acked: int
    received: int


@dataclass
class Result:
    """What a soak run found."""

    minutes: float
    rate: int
    acked: int = 0
    send_errors: int = 0
    received: int = 0
    missing: int = 0
    samples: list[Sample] = field(default_factory=list)
    verdict: dict[str, str] = field(default_factory=dict)


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _flat(values: list[int], *, ratio: float, slack: int) -> tuple[bool, str]:
    base, top = values[0], max(values)
    ok = top <= base * ratio + slack
    return ok, f"first {base}, max {top}, last {values[-1]} ({'flat' if ok else 'GROWING'})"


async def soak(minutes: float, rate: int) -> Result:
    """Run the soak; the cluster is started and stopped here."""
    result = Result(minutes, rate)
    # One byte per message sent (bit 1: acknowledged, bit 2: consumed): the bookkeeping stays
    # tiny, so it does not blur the memory curve it is measuring.
    state = bytearray()
    counts = {"acked": 0, "received": 0}
    cluster = LocalCluster(1, topics=[TOPIC], topic_partitions=3)
    async with cluster:
        master = cluster.master_addr
        producer = Producer(master, topics=[TOPIC])
        consumer = Consumer(master, group="soak", topics=[TOPIC], consume_from="earliest")
        async with producer, consumer:
            end = time.monotonic() + minutes * 60

            async def produce() -> None:
                n = 0
                start = time.monotonic()
                while time.monotonic() < end:
                    body = f"soak-{n}-".encode().ljust(256, b".")
                    state.append(0)
                    seq = n
                    n += 1
                    try:
                        if isinstance(await producer.send(TOPIC, body, timeout=5), SendResult):
                            state[seq] |= 1
                            counts["acked"] += 1
                    except TubeMQError:
                        result.send_errors += 1
                    await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))

            def missing() -> int:
                return sum(1 for flags in state if flags == 1)

            async def consume() -> None:
                while time.monotonic() < end + 60 and not (
                    time.monotonic() > end and missing() == 0
                ):
                    batch = await consumer.getmany(timeout=1.0)
                    async with batch:
                        for m in batch:
                            seq = int(m.body.split(b"-", 2)[1])
                            if not state[seq] & 2:
                                state[seq] |= 2
                                counts["received"] += 1

            async def sample() -> None:
                t0 = time.monotonic()
                while time.monotonic() < end:
                    await asyncio.sleep(SAMPLE_EVERY)
                    fds = len(os.listdir("/proc/self/fd"))
                    s = Sample(
                        round(time.monotonic() - t0, 1),
                        _rss_kib(),
                        fds,
                        len(asyncio.all_tasks()),
                        counts["acked"],
                        counts["received"],
                    )
                    result.samples.append(s)
                    print(json.dumps(asdict(s)), flush=True)

            await asyncio.gather(produce(), consume(), sample())
            result.missing = missing()
    result.acked, result.received = counts["acked"], counts["received"]
    return result


def judge(result: Result) -> bool:
    """Fill ``result.verdict``; True if memory, fds and tasks stayed flat and nothing is missing."""
    steady = result.samples[len(result.samples) // 5 :] or result.samples
    checks = {
        "rss": _flat([s.rss_kib for s in steady], ratio=1.10, slack=0),
        "fds": _flat([s.fds for s in steady], ratio=1.0, slack=2),
        "tasks": _flat([s.tasks for s in steady], ratio=1.0, slack=2),
    }
    ok = all(flag for flag, _ in checks.values()) and result.missing == 0
    result.verdict = {k: text for k, (_, text) in checks.items()}
    result.verdict["messages"] = f"{result.acked} acked, {result.missing} not consumed"
    return ok


def main() -> int:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=200, help="messages per second")
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()
    result = asyncio.run(soak(args.minutes, args.rate))
    ok = judge(result)
    for name, text in result.verdict.items():
        print(f"{name:9} {text}")
    if args.out:
        with open(args.out, "w") as out:
            json.dump(asdict(result), out, indent=1)
    print("SOAK OK" if ok else "SOAK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
