"""``make chaos``: the chaos run on ``LocalCluster(masters=3, brokers=3)``.

Bounded in time (each step has a deadline, the whole run a ceiling), loopback only, stops
itself. Results go to ``benchmarks/results/<date>-<commit>-chaos/chaos.json`` with the load
averages before and after: figures from a busy machine are marked by them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos.events import EVENTS, EventRecord, EventSettings
from benchmarks.chaos.readback import stored_bodies
from benchmarks.chaos.report import event_report, summarize
from benchmarks.chaos.route import route_through
from benchmarks.chaos.traffic import Traffic, TrafficPlan
from benchmarks.harness import env
from benchmarks.harness.session import out_dir_for
from tubemq_aio.testing import FaultProxy, LocalCluster

__all__ = ["ChaosPlan", "main", "run_chaos"]

TOPIC = "chaos_topic"


@dataclass(frozen=True)
class ChaosPlan:
    """One chaos run.

    Attributes:
        events: Event names, in order (keys of :data:`~benchmarks.chaos.events.EVENTS`).
        faults: How long faults last.
        settle_seconds: Traffic time after each event before the next one.
        settle_when_flowing: When set, the settle after an event ends this many seconds after
            the producers and both consumer groups flow again (an acknowledgement and a
            receipt of each group after the event's end: what ``produce_back_s`` and
            ``consume_back_s`` report), and never later than ``settle_seconds``; ``None``
            (``make chaos``) settles ``settle_seconds`` after every event.
        warmup_timeout: Seconds allowed for both consumer groups to receive a first message.
        drain_timeout: Seconds the consumers get, after the producers stop, to catch up.
        readback_timeout: Seconds to read the topic's stored messages back after the run
            (:mod:`benchmarks.chaos.readback`).
        uvloop_producer: Also run a producer on uvloop (its own thread).
    """

    events: tuple[str, ...] = tuple(EVENTS)
    faults: EventSettings = field(default_factory=EventSettings)
    settle_seconds: float = 15.0
    settle_when_flowing: float | None = None
    warmup_timeout: float = 120.0
    drain_timeout: float = 90.0
    readback_timeout: float = 120.0
    uvloop_producer: bool = True


async def _warm_up(traffic: Traffic, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(log.counts for log in traffic.consumer_logs):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the consumers received nothing within {timeout:.0f}s")
        await asyncio.sleep(0.5)


async def _settle(traffic: Traffic, rec: EventRecord, plan: ChaosPlan) -> None:
    """Let traffic run after an event (:attr:`ChaosPlan.settle_seconds`, or less with
    :attr:`ChaosPlan.settle_when_flowing`)."""
    deadline = time.monotonic() + plan.settle_seconds
    if plan.settle_when_flowing is not None:
        while time.monotonic() < deadline:
            if traffic.flowing_since(rec.healed):
                deadline = min(deadline, time.monotonic() + plan.settle_when_flowing)
                break
            await asyncio.sleep(0.2)
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))


async def run_chaos(cluster: LocalCluster, plan: ChaosPlan, topic: str = TOPIC) -> dict[str, Any]:
    """Run traffic and ``plan.events`` against a started cluster whose brokers carry ``topic``.

    Returns:
        ``{"events": [per-event figures], "totals": {...}, "plan": {...}}``.
    """
    target = cluster.brokers[-1].addr
    async with FaultProxy(target) as proxy:
        with route_through(target, proxy.addr):
            traffic = Traffic(
                TrafficPlan(cluster.master_addr, topic), uvloop_producer=plan.uvloop_producer
            )
            traffic.start()
            records: list[EventRecord] = []
            try:
                await _warm_up(traffic, plan.warmup_timeout)
                for name in plan.events:
                    rec = EventRecord(name)
                    records.append(rec)
                    await EVENTS[name](cluster, proxy, plan.faults, rec)
                    await _settle(traffic, rec, plan)
                end = time.monotonic()
                await traffic.stop_producers()
                await traffic.drain(plan.drain_timeout)
            finally:
                await traffic.stop()
            stored = await stored_bodies(cluster.master_addr, topic, plan.readback_timeout)
    ends = [r.began for r in records[1:]] + [end]
    events = [event_report(traffic, rec, hi, stored) for rec, hi in zip(records, ends, strict=True)]
    return {
        "events": events,
        "totals": summarize(events, traffic, stored),
        "plan": {
            "events": list(plan.events),
            "freeze_seconds": plan.faults.freeze_seconds,
            "cut_seconds": plan.faults.cut_seconds,
            "settle_seconds": plan.settle_seconds,
            "settle_when_flowing": plan.settle_when_flowing,
            "rpc_timeout": traffic.plan.rpc_timeout,
            "send_timeout": traffic.plan.send_timeout,
            "senders_per_producer": traffic.plan.senders,
            "send_interval": traffic.plan.send_interval,
        },
    }


async def _main(ns: argparse.Namespace) -> dict[str, Any]:
    plan = ChaosPlan(
        events=tuple(ns.events) if ns.events else tuple(EVENTS),
        settle_seconds=ns.settle,
    )
    before = env.collect()
    async with LocalCluster(
        3,
        masters=3,
        topics=[TOPIC],
        topic_partitions=2,
        consumer_heartbeat_timeout_ms=15000,
        keep_work_dir=ns.keep_logs,
    ) as cluster:
        bring_up = round(cluster.bring_up_seconds, 1)
        if ns.keep_logs:
            print(f"server logs: {cluster.log_dir}", flush=True)
        result = await asyncio.wait_for(run_chaos(cluster, plan), ns.ceiling)
    result["cluster"] = {"masters": 3, "brokers": 3, "bring_up_seconds": bring_up}
    result["env"] = before
    result["load_average_end"] = env.load_average()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chaos run, write its JSON, print the per-event table; 1 if a stored message was
    never consumed, an acknowledged one is missing on its broker without a SIGKILL to explain
    it, or an untyped error reached the application."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos")
    parser.add_argument("--events", nargs="*", choices=list(EVENTS), help="default: all, in order")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after each event")
    parser.add_argument("--ceiling", type=float, default=1500.0, help="whole-run limit (s)")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the cluster's work dir (server logs)"
    )
    parser.add_argument("--out", type=Path, default=env.REPO / "benchmarks" / "results")
    ns = parser.parse_args(argv)
    result = asyncio.run(_main(ns))
    out = out_dir_for(ns.out, f"{env.git_revision()}-chaos")
    (out / "chaos.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for ev in result["events"]:
        print(json.dumps(ev))
    print(json.dumps(result["totals"]))
    print(f"written to {out / 'chaos.json'}")
    groups = ("server-balanced", "client-balanced")
    totals = result["totals"]
    lost = sum(totals[g]["lost"] + totals[g]["never_stored_unexplained"] for g in groups)
    return 1 if lost or totals["untyped_errors"] else 0
