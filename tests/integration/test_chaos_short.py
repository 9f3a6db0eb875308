"""The short chaos run (``make chaos`` is the long one): its own cluster of three masters in one
HA group and two brokers; producers on asyncio and uvloop, a server-balanced group of two and a
client-balanced consumer read throughout while the active master is SIGKILLed, a broker is frozen
longer than the RPC timeout, and the network to a broker is cut and healed. Every acknowledged
message must be consumed by both groups, every error raised to the application must be typed,
and produce and consume must flow again after each event. It runs in its own xdist group
(``tests/xdist_groups.py``): about 2.5 minutes, most of it the cluster coming up."""

from __future__ import annotations

import pytest

from benchmarks.chaos.events import EventSettings
from benchmarks.chaos.run import ChaosPlan, run_chaos
from tubemq_aio.testing import LocalCluster

TOPIC = "chaos_short"
GROUPS = ("server-balanced", "client-balanced")


@pytest.mark.timeout(420)
async def test_short_chaos_run_loses_nothing_acknowledged() -> None:
    plan = ChaosPlan(
        events=("master_sigkill", "broker_freeze", "network_cut"),
        faults=EventSettings(freeze_seconds=7.0, cut_seconds=6.0, server_timeout=120.0),
        settle_seconds=6.0,
        warmup_timeout=90.0,
        drain_timeout=60.0,
    )
    async with LocalCluster(
        2, masters=3, topics=[TOPIC], topic_partitions=2, consumer_heartbeat_timeout_ms=15000
    ) as cluster:
        result = await run_chaos(cluster, plan, TOPIC)
    totals, events = result["totals"], result["events"]
    assert totals["untyped_errors"] == [], totals
    assert all(n > 0 for n in totals["acked_by_producer"].values()), totals  # both loops sent
    for group in GROUPS:
        assert totals[group]["lost"] == 0, (group, events)
        assert totals[group]["lost_unflushed"] == 0, (group, events)  # no broker was SIGKILLed
        assert totals[group]["lost_outside_events"] == 0, (group, totals)
    assert [e["event"] for e in events] == list(plan.events)
    for event in events:
        assert event["acked"] > 0, event
        assert event["produce_back_s"] is not None, event  # sends flowed again after the fault
        for group in GROUPS:
            assert event[group]["consume_back_s"] is not None, (group, event)
    takeover = events[0]["notes"]
    assert takeover["killed"] != takeover["took_over"], takeover
