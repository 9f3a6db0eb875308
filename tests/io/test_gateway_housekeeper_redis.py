"""The housekeeper's Lua scripts and ticks against a real redis-server (no TubeMQ needed:
probes are off here; the real-cluster test covers them)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.gateway_redis import flushed_store
from tubemq_aio.gateway.config.tables import GroupSpec, HousekeeperConfig
from tubemq_aio.gateway.engine.data import ConsumeSettings
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.housekeeper.jobs import Housekeeper
from tubemq_aio.gateway.leases.housekeeping_store import HousekeeperStore
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.redis_keys import clients_keys, leader_key, scope_keys
from tubemq_aio.testing import RedisServer, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

NO_MASTER = "127.0.0.1:9"
PARTS = ["1:t:0", "1:t:1"]


@pytest_asyncio.fixture(loop_scope="module")
async def store(redis_server: RedisServer) -> AsyncIterator[LeaseStore]:
    async with flushed_store(redis_server) as (_, lease_store):
        await lease_store.boot(["gg", "bb"], allow_init=True)
        yield lease_store


async def test_lead_is_compare_and_set_with_redis_expiry(store: LeaseStore) -> None:
    hk = HousekeeperStore(store)
    a = await hk.lead("gg", "A", 60_000)
    b = await hk.lead("gg", "B", 60_000)
    assert a.held
    assert not b.held
    assert b.holder == "A"
    assert 0 < b.ttl_ms <= 60_000
    assert (await hk.lead("gg", "A", 60_000)).held  # renewal by the holder
    await hk.resign("gg", "B")  # not the holder: nothing happens
    assert await hk.holder("gg") == "A"
    await hk.resign("gg", "A")
    assert await hk.holder("gg") is None
    assert (await hk.lead("gg", "B", 200)).held
    assert not (await hk.lead("gg", "A", 200)).held

    async def lapsed() -> bool:
        return (await hk.lead("gg", "A", 60_000)).held

    await wait_until(lapsed, 10, "lapsed")  # B stopped renewing: its key expires on Redis's clock
    assert await hk.holder("gg") == "A"
    assert await store.client.pttl(leader_key("gg")) > 1000


async def test_idle_partitions_are_those_not_leased_for_the_interval(store: LeaseStore) -> None:
    hk = HousekeeperStore(store)
    await store.sync_parts("gg", "c", PARTS)
    assert sorted(await hk.idle_partitions("gg", "c", 0)) == PARTS
    assert await hk.idle_partitions("gg", "c", 60_000) == []
    got = await store.acquire("gg", "c", "L1", 60_000, "h", want=PARTS[0])
    assert got.status == "leased"
    assert await hk.idle_partitions("gg", "c", 0) == [PARTS[1]]


async def test_collect_deletes_only_idle_unleased_broadcast_scopes(store: LeaseStore) -> None:
    hk = HousekeeperStore(store)
    await store.sync_parts("gg", "c", PARTS)
    for scope in ("b:x", "b:y"):
        await store.add_client("gg", scope)
        await store.sync_parts("gg", scope, PARTS)
    got = await store.acquire("gg", "b:y", "Ly", 60_000, "h")
    assert got.status == "leased"
    now, seen = await hk.clients("gg")
    assert set(seen) == {"b:x", "b:y"}
    assert all(now - 5000 < t <= now for t in seen.values())
    assert await hk.collect("gg", "b:x", 60_000) == "active"
    await asyncio.sleep(0.3)
    assert await hk.collect("gg", "c", 100) == "refused"  # never a clustering scope
    assert await hk.collect("gg", "b:y", 100) == "leased"
    assert await hk.collect("gg", "b:x", 100) == "deleted"
    assert await hk.collect("gg", "b:x", 100) == "absent"
    for key in scope_keys("gg", "b:x")[3:]:
        assert not await store.client.exists(key), key
    assert await store.clients("gg") == ["b:y"]
    assert await store.members("gg", "c") == PARTS  # clustering state untouched
    await store.client.sadd(clients_keys("gg")[0], "b:old")  # state from before last-seen stamps
    assert (await hk.clients("gg"))[1]["b:old"] == -1
    assert await hk.collect("gg", "b:old", 100) == "adopted"
    assert (await hk.clients("gg"))[1]["b:old"] > 0


def _keeper(engine: ConsumeService, replica: str) -> Housekeeper:
    """The housekeeper of ``engine``, handed its store and sessions as the app does."""
    groups = engine.settings.groups
    return Housekeeper(engine.store, engine.sessions, groups, HK, replica=replica, rpc_timeout=3.0)


def _service(url: str) -> ConsumeService:
    groups = (
        GroupSpec(name="gg", topics=("t",)),
        GroupSpec(name="bb", topics=("t",), mode="broadcast"),
    )
    settings = ConsumeSettings(
        masters=NO_MASTER, redis=url, groups=groups, rpc_timeout=3.0, allow_init=True
    )
    return ConsumeService(settings)


HK = HousekeeperConfig(
    leader_lease_ms=1000, probe_interval_ms=0, client_idle_ms=1000, session_idle_ms=0
)


def _gauges(keeper: Housekeeper) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for family in keeper.collect():
        for sample in family.samples:
            out[(sample.name, *sample.labels.values())] = sample.value
    return out


async def test_one_leader_per_group_gauges_from_it_gc_and_failover(
    redis_server: RedisServer, store: LeaseStore
) -> None:
    # a committed offset and a max for one partition: lag 280 bytes
    await store.sync_parts("gg", "c", PARTS)
    got = await store.acquire("gg", "c", "L1", 60_000, "h", want=PARTS[0])
    assert (await store.init(LeaseKey("gg", "c", PARTS[0], "L1"), 0, 280)).status == "ok"
    await store.settle(LeaseKey("gg", "c", PARTS[0], "L1"), "release")
    assert got.status == "leased"
    await store.add_client("bb", "b:gone")
    await store.sync_parts("bb", "b:gone", PARTS)
    one, two = _service(redis_server.url), _service(redis_server.url)
    await one.start()
    await two.start()
    first, second = _keeper(one, "r1"), _keeper(two, "r2")
    try:
        await first.start()  # its own task ticks too; ticks are idempotent
        await second.start()

        async def one_leader_each() -> bool:
            a, b = set(first.leading()), set(second.leading())
            return not a & b and a | b == {"gg", "bb"}

        await wait_until(
            one_leader_each, 10, "one leader each"
        )  # per group: exactly one of the two leads
        leader, other = (first, second) if "gg" in first.leading() else (second, first)

        async def exported() -> bool:
            return ("tubemq_gateway_group_lag_total_bytes", "gg", "c") in _gauges(leader)

        await wait_until(exported, 30, "exported")  # 2.5 s idle; over 10 s once in a full run
        gauges = _gauges(leader)
        assert gauges[("tubemq_gateway_group_lag_bytes", "gg", "c", PARTS[0])] == 280
        assert gauges[("tubemq_gateway_group_lag_total_bytes", "gg", "c")] == 280
        assert gauges[("tubemq_gateway_housekeeper_leader", "gg")] == 1
        assert ("tubemq_gateway_group_lag_total_bytes", "gg", "c") not in _gauges(other)
        assert _gauges(other)[("tubemq_gateway_housekeeper_leader", "gg")] == 0

        async def collected() -> bool:
            return await store.clients("bb") == []

        await wait_until(
            collected, 10, "collected"
        )  # idle 1 s: the leader of bb deleted the client's state
        assert not await store.client.exists(scope_keys("bb", "b:gone")[3])
        assert await store.members("gg", "c") == PARTS
        assert first.stats.clients_collected + second.stats.clients_collected == 1

        await leader.close()  # resigns: the other takes over at its next tick

        async def took_over() -> bool:
            return other.leading() == ["bb", "gg"]

        await wait_until(took_over, 5, "took over")

        async def exported_by_other() -> bool:
            return ("tubemq_gateway_group_lag_total_bytes", "gg", "c") in _gauges(other)

        await wait_until(exported_by_other, 30, "exported by other")
        assert _gauges(other)[("tubemq_gateway_group_lag_total_bytes", "gg", "c")] == 280
        assert not _gauges(leader).get(("tubemq_gateway_housekeeper_leader", "gg"))
    finally:
        await first.close()
        await second.close()
        await one.close()
        await two.close()
    assert math.isinf(first._lead["gg"].held_until)


async def test_the_engine_and_the_housekeeper_own_their_tasks(redis_server: RedisServer) -> None:
    engine = _service(redis_server.url)
    await engine.start()
    keeper = _keeper(engine, "r1")
    try:
        await keeper.start()
        assert sorted(t.get_name() for t in keeper.tasks.tasks) == [
            "tubemq-gateway-housekeeper-elect",
            "tubemq-gateway-housekeeper-work",
        ]
        assert [t.get_name() for t in engine.tasks.tasks] == ["tubemq-gateway-wake"]
    finally:
        await keeper.close()
        await engine.close()
    assert keeper.tasks.tasks == []
    assert keeper.tasks.closed
    assert engine.tasks.tasks == []
    assert engine.tasks.closed
    gateway_tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("tubemq-gateway")]
    assert [t for t in gateway_tasks if not t.done()] == []
