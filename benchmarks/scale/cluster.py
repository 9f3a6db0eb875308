"""The scale benchmark's stand-in cluster: a :class:`~tubemq_aio.testing.FakeCluster` (one
broker) in a process of its own, so its CPU never counts as the client's.

It prints the master address, then answers one command per stdin line with one JSON line:

* ``fill TOPIC COUNT SIZE``: store ``COUNT`` messages of ``SIZE`` bytes spread evenly over the
  topic's partitions (straight into the broker's logs: no producer in the figures);
* ``stats``: its own CPU seconds and the requests each node answered, by method id;
* end of input: stop.

Run: ``python -m benchmarks.scale.cluster TOPIC:PARTITIONS [TOPIC:PARTITIONS ...]``.

Each partition is a store of its own (``TopicLayout(partitions=1, stores=P)``). The partitions of
one store share its index, as on a real broker, so a fetch for one of them skips the others'
records (at most 6 000 a read): with every partition in one store, a fetch at P = 8 192 would find
about one message of its own, and the cost per message would measure the broker's skipping, not
the client. One store a partition keeps every fetch a full batch at every size.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from collections.abc import Sequence

from tubemq_aio.testing import FakeCluster
from tubemq_aio.testing._fake_store import TopicLayout


def _fill(cluster: FakeCluster, topic: str, count: int, size: int) -> int:
    broker = cluster.brokers[0]
    ids = cluster.topics[topic].partition_ids()
    body = bytes(97 + i % 26 for i in range(size))
    for n in range(count):
        pid = ids[n % len(ids)]
        broker.log(topic, pid).append(n + 1, body, 0, partition_id=pid)
    return count


def _stats(cluster: FakeCluster) -> dict[str, object]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    nodes = {"master": cluster.master.node.requests}
    nodes.update({f"broker{b.broker_id}": b.node.requests for b in cluster.brokers})
    return {
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "requests": {name: {str(m): n for m, n in sorted(r.items())} for name, r in nodes.items()},
    }


async def serve(topics: dict[str, TopicLayout]) -> None:
    """Run the cluster until stdin ends, answering the commands above."""
    loop = asyncio.get_running_loop()
    async with FakeCluster(topics=topics, client_timeout=60.0, registration_timeout=60.0) as c:
        print(c.master_addr, flush=True)
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            words = line.split()
            if words[:1] == ["fill"]:
                answer: object = {"filled": _fill(c, words[1], int(words[2]), int(words[3]))}
            elif words[:1] == ["stats"]:
                answer = _stats(c)
            else:
                answer = {"error": f"unknown command {line.strip()!r}"}
            print(json.dumps(answer), flush=True)


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    topics = {}
    for spec in argv:
        name, _, count = spec.partition(":")
        topics[name] = TopicLayout(name, partitions=1, stores=int(count or 1))
    asyncio.run(serve(topics))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
