"""The booking and the read-ahead mark in one round trip (``LeaseStore.record_and_mark``), on a
real redis-server and on both of the store's paths (packed by the gateway, redis-py's pipeline),
checked against the pure model: the mark is written only when the batch was booked under the
live lease, a retry answers the same, and a flushed script cache is loaded again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gateway_redis import flushed_store, model_view
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking, GroupState
from tubemq_aio.gateway.leases.packed_calls import PackedCalls
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.testing import RedisServer

G, S = "g", "c"
PARTS = ["1:t:0", "1:t:1"]


def _flat(reply: Reply) -> tuple[Any, ...]:
    return (reply.status, *reply.values)


@pytest.mark.parametrize("packed", [True, False])
async def test_the_booking_and_its_mark_in_one_round_trip_as_the_model(
    redis_server: RedisServer, packed: bool
) -> None:
    async with flushed_store(redis_server) as (client, store):
        store.packed = PackedCalls(client.connection_pool) if packed else None
        model = GroupState()
        await store.boot([G], allow_init=True)
        model.boot()

        async def same(r: Reply, expect: tuple[Any, ...]) -> None:
            assert _flat(r) == expect
            assert model_view(await store.dump(G, S), S) == model_view(model, S)

        r = await store.sync_parts(G, S, PARTS)
        await same(r, model.sync_parts(r.now, S, PARTS))
        for lid in ("L1", "L2"):
            r = await store.acquire(G, S, lid, 60_000, "h")
            await same(r, model.acquire(r.now, S, lid, 60_000, "h"))
            key = LeaseKey(G, S, str(r.values[0]), lid)
            r = await store.init(key, 0, 280)
            await same(r, model.init(r.now, S, key.partition_key, lid, 0, 280))
        one, empty = LeaseKey(G, S, PARTS[0], "L1"), LeaseKey(G, S, PARTS[1], "L2")
        before = store.roundtrips
        booked, marked = await store.record_and_mark(one, Booking(0, 56, 280, 2, 0, 56), "R1", 3000)
        assert store.roundtrips == before + 1
        expect_booked = model.record(booked.now, S, PARTS[0], "L1", Booking(0, 56, 280, 2, 0, 56))
        assert _flat(booked) == expect_booked == ("ok",)
        await same(marked, model.read_ahead(marked.now, S, PARTS[0], "L1", "R1", 3000))
        assert marked.status == "ok"
        assert int(marked.values[0]) == marked.now + 3000  # the mark's deadline
        # a retry of the round trip answers the same and changes nothing
        again = await store.record_and_mark(one, Booking(0, 56, 280, 2, 0, 56), "R1", 3000)
        assert (_flat(again[0]), again[1].status, again[1].values) == (
            ("ok",),
            "ok",
            marked.values,
        )
        # an empty batch is released by its booking: no mark
        booked, marked = await store.record_and_mark(empty, Booking(0, 0, 0, 0, 400, 0), "R2", 3000)
        assert _flat(booked)[0] == "released"
        expect = model.record(booked.now, S, PARTS[1], "L2", Booking(0, 0, 0, 0, 400, 0))
        assert _flat(booked) == expect
        await same(marked, model.read_ahead(marked.now, S, PARTS[1], "L2", "R2", 3000))
        assert marked.status == "stale"
        # scripts flushed: the round trip loads them and is sent again
        await client.script_flush()
        r = await store.settle(one, "ack")
        await same(r, model.settle(r.now, S, PARTS[0], "L1", "ack"))
        r = await store.acquire(G, S, "L3", 60_000, "h", PARTS[0])
        await same(r, model.acquire(r.now, S, "L3", 60_000, "h", PARTS[0]))
        assert r.status == "none"  # the mark keeps the partition out
        await client.script_flush()
        r = await store.read_ahead_done(G, S, PARTS[0], "R1", "R1|56", 84)
        await same(r, model.read_ahead_done(r.now, S, PARTS[0], "R1", "R1|56", 84))
        r = await store.acquire(G, S, "L3", 60_000, "h", PARTS[0])
        await same(r, model.acquire(r.now, S, "L3", 60_000, "h", PARTS[0]))
        assert r.leased().fence == "R1|56"
        await client.script_flush()
        key = LeaseKey(G, S, PARTS[0], "L3")
        three = Booking(56, 84, 280, 1, 0, 84)
        booked, marked = await store.record_and_mark(key, three, "R3", 10)
        assert _flat(booked) == model.record(booked.now, S, PARTS[0], "L3", three) == ("ok",)
        await same(marked, model.read_ahead(marked.now, S, PARTS[0], "L3", "R3", 10))
        with pytest.raises(ValueError, match="token"):
            await store.record_and_mark(key, Booking(56, 84, 280, 1, 0, 84), "", 10)


async def test_a_store_without_a_packed_path_keeps_one_round_trip(
    redis_server: RedisServer,
) -> None:
    async with flushed_store(redis_server) as (_client, store):
        assert isinstance(store, LeaseStore)
        store.packed = None
        await store.boot([G], allow_init=True)
        await store.sync_parts(G, S, PARTS[:1])
        await store.acquire(G, S, "L1", 60_000, "h")
        key = LeaseKey(G, S, PARTS[0], "L1")
        await store.init(key, 0, 280)
        before = store.roundtrips
        booked, marked = await store.record_and_mark(key, Booking(0, 28, 280, 1, 0, 28), "R", 500)
        assert store.roundtrips == before + 1
        assert (booked.status, marked.status) == ("ok", "ok")
