"""The housekeeper's scripts (leadership, idle partitions, the broadcast client registry and its
garbage collection) against a real redis-server, checked against the pure model."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.gateway_redis import flushed_store, model_view
from tubemq_aio.gateway.leases.housekeeping_model import HousekeepingState
from tubemq_aio.gateway.leases.housekeeping_store import HousekeeperStore
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import GroupState
from tubemq_aio.gateway.leases.redis_keys import clients_keys
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

G = "g"
PARTS = ["1:t:0", "1:t:1", "2:t:0"]
SCOPES = ["b:x", "b:y", "b:z", "c"]


@pytest_asyncio.fixture(loop_scope="module")
async def store(redis_server: RedisServer) -> AsyncIterator[LeaseStore]:
    async with flushed_store(redis_server) as (_, lease_store):
        await lease_store.boot([G], allow_init=True)
        yield lease_store


async def _redis_ms(store: LeaseStore) -> int:
    sec, usec = await store.client.time()
    return int(sec) * 1000 + int(usec) // 1000


class _Walk:
    """One random sequence of housekeeper and lease operations on Redis and on the model."""

    def __init__(self, store: LeaseStore, seed: int) -> None:
        self.store = store
        self.hk = HousekeeperStore(store)
        self.rng = random.Random(seed)
        self.leases = GroupState()
        self.leases.boot()
        self.model = HousekeepingState()
        # Where the current leadership lapses on Redis's clock lies in this range: the script
        # that took it ran somewhere between two readings of the clock.
        self.untils: tuple[int, ...] = (0,)

    async def step(self) -> str:
        op = self.rng.choice(
            [
                "add",
                "add",
                "sync",
                "sync",
                "acquire",
                "acquire",
                "settle",
                "lead",
                "lead",
                "resign",
                "idle",
                "clients",
                "gc",
                "gc",
                "gc",
                "sleep",
            ]
        )
        await getattr(self, f"_{op}")()
        return op

    async def _sleep(self) -> None:
        await asyncio.sleep(self.rng.choice([0.0, 0.01, 0.04]))

    async def _add(self) -> None:
        scope = self.rng.choice(SCOPES[:3])
        cap, owner, owner_cap = self.rng.choice([0, 2]), self.rng.choice(["k1", "k2"]), 1
        before = await _redis_ms(self.store)
        got = await self.store.add_client(G, scope, cap, owner, owner_cap)
        stamped = await self.store.client.zscore(clients_keys(G)[1], scope)
        now = int(stamped) if got == "ok" and stamped is not None else before
        assert got == self.model.add_client(now, scope, cap, owner, owner_cap)
        if got == "ok":
            assert before <= now <= await _redis_ms(self.store)

    async def _sync(self) -> None:
        scope = self.rng.choice(SCOPES)
        plist = sorted(self.rng.sample(PARTS, self.rng.randint(1, len(PARTS))))
        r = await self.store.sync_parts(G, scope, plist)
        assert (r.status, *r.values) == self.leases.sync_parts(r.now, scope, plist)

    async def _acquire(self) -> None:
        scope = self.rng.choice(SCOPES)
        lease_id, lease_ms = f"L{self.rng.getrandbits(32)}", self.rng.choice([20, 60_000])
        r = await self.store.acquire(G, scope, lease_id, lease_ms, "h")
        assert (r.status, *r.values) == self.leases.acquire(r.now, scope, lease_id, lease_ms, "h")

    async def _settle(self) -> None:
        scope = self.rng.choice(SCOPES)
        live = sorted(self.leases.scope(scope).acq.items())
        if not live:
            return
        lease_id, p = self.rng.choice(live)
        r = await self.store.settle(LeaseKey(G, scope, p, lease_id), "release")
        assert (r.status, *r.values) == self.leases.settle(r.now, scope, p, lease_id, "release")

    async def _lead(self) -> None:
        me, lease_ms = self.rng.choice(["A", "B"]), self.rng.choice([1, 30, 60_000])
        before = await _redis_ms(self.store)
        got = await self.hk.lead(G, me, lease_ms)
        after = await _redis_ms(self.store)
        # The script ran somewhere in [before, after], and the current leadership lapses
        # somewhere in self.untils: the model must agree with Redis for one of those.
        branches: list[HousekeepingState] = []
        for until in self.untils:
            for at in (before, after):
                branch = copy.deepcopy(self.model)
                branch.leader_until = until
                if branch.lead(at, me, lease_ms) == (got.held, got.holder):
                    branches.append(branch)
        assert branches, (got, self.model, self.untils, before, after)
        self.model = branches[0]
        if got.held:
            self.untils = (before + lease_ms, after + lease_ms)

    async def _resign(self) -> None:
        me = self.rng.choice(["A", "B"])
        await self.hk.resign(G, me)
        self.model.resign(me)
        holder = await self.hk.holder(G)
        if holder is None:  # resigned, or lapsed on Redis's clock
            self.model.leader = None
        assert holder == self.model.leader

    async def _idle(self) -> None:
        scope = self.rng.choice(SCOPES)
        older = self.rng.choice([0, 15, 3_600_000])
        before = await _redis_ms(self.store)
        got = await self.hk.idle_partitions(G, scope, older)
        after = await _redis_ms(self.store)
        low = HousekeepingState.idle_partitions(self.leases, before, scope, older)
        high = HousekeepingState.idle_partitions(self.leases, after, scope, older)
        assert set(low) <= set(got) <= set(high)
        assert got == [p for p in high if p in got]  # the same order: oldest first

    async def _clients(self) -> None:
        now, seen = await self.hk.clients(G)
        assert seen == self.model.listed()
        assert now >= max(seen.values(), default=0)

    async def _gc(self) -> None:
        scope = self.rng.choice(SCOPES)
        idle = self.rng.choice([0, 1, 1, 25, 3_600_000])
        before = await _redis_ms(self.store)
        got = await self.hk.collect(G, scope, idle)
        after = await _redis_ms(self.store)
        # hk_gc answers no time: the model replays it at each ms the script may have run at
        for at in range(before, after + 1):
            model, leases = copy.deepcopy(self.model), copy.deepcopy(self.leases)
            if model.collect(leases, at, scope, idle) == got:
                self.model, self.leases = model, leases
                return
        raise AssertionError(f"hk_gc answered {got!r}, which the model never does in the window")


@pytest.mark.parametrize("seed", range(6))
async def test_housekeeper_scripts_match_the_model(store: LeaseStore, seed: int) -> None:
    walk = _Walk(store, seed)
    for i in range(80):
        op = await walk.step()
        _, seen = await walk.hk.clients(G)
        assert seen == walk.model.listed(), (seed, i, op)
        for scope in SCOPES:
            real = await store.dump(G, scope)
            assert model_view(real, scope) == model_view(walk.leases, scope), (seed, i, op, scope)
