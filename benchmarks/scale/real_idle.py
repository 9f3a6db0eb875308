"""Idle cost on a real broker: one consumer holding P empty partitions of a ``LocalCluster``
topic, the fixed ``msg_not_found_wait`` period against the default idle back-off, alternated.

Prints one JSON line per run (client and broker share of a core, fetches a second) and the load
average before and after. Run: ``python -m benchmarks.scale.real_idle [P]`` (default 256).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

import psutil

from tubemq_aio import Consumer
from tubemq_aio.testing import LocalCluster, wait_until

WARM_UP = 15.0
MEASURED = 30.0
FIXED_PERIOD = 0.4  # msg_not_found_wait's default: the official clients' fixed period


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(cluster: LocalCluster, partitions: int, fixed: bool, group: str) -> dict[str, Any]:
    options: dict[str, Any] = {"msg_not_found_max_wait": FIXED_PERIOD} if fixed else {}
    broker_pid = cluster.brokers[0].pid
    assert broker_pid is not None
    broker = psutil.Process(broker_pid)
    async with Consumer(
        cluster.master_addr,
        group=group,
        topics=["idle"],
        consume_from="latest",
        join_heartbeat_interval=1.0,
        **options,
    ) as consumer:
        await wait_until(
            lambda: len(consumer.assignment()) >= partitions, 90, "every partition held"
        )
        held = len(consumer.assignment())
        await asyncio.sleep(WARM_UP)
        cpu0, broker0, wall0 = _cpu_self(), sum(broker.cpu_times()[:2]), time.monotonic()
        fetches0 = consumer.stats.fetches
        await asyncio.sleep(MEASURED)
        cpu1, broker1, wall1 = _cpu_self(), sum(broker.cpu_times()[:2]), time.monotonic()
        fetches1 = consumer.stats.fetches
    wall = wall1 - wall0
    return {
        "mode": f"fixed {FIXED_PERIOD} s" if fixed else "default back-off",
        "held": held,
        "client_core_share": round((cpu1 - cpu0) / wall, 4),
        "broker_core_share": round((broker1 - broker0) / wall, 4),
        "fetches_per_s": round((fetches1 - fetches0) / wall, 1),
    }


async def _main(partitions: int) -> None:
    load_before = os.getloadavg()
    async with LocalCluster(topics=["idle"], topic_partitions=partitions) as cluster:
        for i, fixed in enumerate((True, False, True, False)):
            print(json.dumps(await _run(cluster, partitions, fixed, f"idle{i}")), flush=True)
    print(
        json.dumps(
            {"partitions": partitions, "load_before": load_before, "load_after": os.getloadavg()}
        )
    )


def main(argv: list[str]) -> int:
    """Entry point (see the module docstring)."""
    asyncio.run(_main(int(argv[0]) if argv else 256))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
