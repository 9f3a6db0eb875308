"""The wake-ups of a fetch that carries acks, against a real redis-server: the acks of the
acquire's own scope publish none, and the acquire wakes the scope's long polls only when a
partition is still due after it has leased one (or when it failed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio.client import PubSub

from tests.support.gateway_redis import flushed_store
from tubemq_aio.gateway.engine.ack_pipeline import settle_then_acquire
from tubemq_aio.gateway.errors import GatewayError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.leases.redis_client import RedisClient
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

G = "g"
SENTINEL = "--sentinel--"


@pytest_asyncio.fixture(loop_scope="module")
async def wired(redis_server: RedisServer) -> AsyncIterator[tuple[LeaseStore, PubSub]]:
    async with flushed_store(redis_server) as (client, store):
        await store.boot([G], allow_init=True)
        # every script loaded once, so a pipeline runs in its order (no NOSCRIPT re-send)
        assert (await store.settle(LeaseKey(G, "c", "1:t:0", "none"), "ack")).status == "stale"
        listener = client.pubsub()
        await listener.subscribe(WAKE_CHANNEL)
        first = await listener.get_message(timeout=10)
        assert first is not None
        assert first["type"] == "subscribe"
        try:
            yield store, listener
        finally:
            await listener.aclose()  # type: ignore[no-untyped-call]


async def _wakes(client: RedisClient, listener: PubSub) -> list[str]:
    """The wake messages published since the last call: a sentinel published now arrives
    after all of them (one channel keeps its order for one subscriber)."""
    await client.publish(WAKE_CHANNEL, SENTINEL)
    out: list[str] = []
    while True:
        msg = await listener.get_message(ignore_subscribe_messages=True, timeout=10)
        assert msg is not None, "the sentinel never arrived"
        data = msg["data"].decode()
        if data == SENTINEL:
            return out
        out.append(data)


async def _leased(store: LeaseStore, scope: str, lease_id: str) -> LeaseKey:
    """Lease a partition of ``scope`` and book a batch on it, so that an ack commits."""
    got = await store.acquire(G, scope, lease_id, 60_000, "h")
    assert got.status == "leased"
    p = got.leased().partition_key
    key = LeaseKey(G, scope, p, lease_id)
    assert (await store.init(key, 0, 1000)).status == "ok"
    assert (await store.record(key, Booking(0, 56, 1000, 2, 0, 56))).status == "ok"
    return LeaseKey(G, scope, p, lease_id)


def _ok(answers: list[Reply | Exception]) -> list[str]:
    return [a.status if isinstance(a, Reply) else repr(a) for a in answers]


#: (partitions per scope, the scope of each lease acked, the acquire's scope, SCRIPT FLUSH
#: first, the wake-ups expected)
CASES = {
    # the acquire leases the partition the ack freed: nobody is woken for nothing
    "leased_again": ({"c": ["1:t:0"]}, ["c"], "c", False, []),
    # one of the two freed partitions is still due after the acquire: one wake-up
    "one_left": ({"c": ["1:t:0", "1:t:1"]}, ["c", "c"], "c", False, [f"{G}|c"]),
    # an ack of another scope wakes its own scope as before
    "other_scope": ({"b:x": ["1:t:0"], "b:y": ["1:t:0"]}, ["b:x"], "b:y", False, [f"{G}|b:x"]),
    # every command answered NOSCRIPT and was sent again alone, the ack first: a re-sent ack
    # cannot count on an acquire behind it, so it publishes its own wake-up
    "noscript": ({"c": ["1:t:0"]}, ["c"], "c", True, [f"{G}|c"]),
}


@pytest.mark.parametrize("case", CASES)
async def test_acks_carried_by_an_acquire_wake_the_scopes_that_have_a_partition_left(
    wired: tuple[LeaseStore, PubSub], case: str
) -> None:
    parts, acked, scope, flush, expected = CASES[case]
    store, listener = wired
    for sc, plist in parts.items():
        await store.sync_parts(G, sc, plist)
    refs = [await _leased(store, sc, f"A{i}") for i, sc in enumerate(acked)]
    if flush:
        await store.client.script_flush()
    await _wakes(store.client, listener)  # what the set-up published

    answers, got = await settle_then_acquire(store, refs, G, scope, "B", 60_000, "h")

    assert _ok(answers) == ["acked"] * len(refs)
    assert got.status == "leased"
    assert await _wakes(store.client, listener) == expected


async def test_a_failed_acquire_after_quiet_acks_still_wakes_the_scope(
    wired: tuple[LeaseStore, PubSub],
) -> None:
    store, listener = wired
    await store.sync_parts(G, "c", ["1:t:0"])
    first = await _leased(store, "c", "A")
    await _wakes(store.client, listener)

    # a lease length the script cannot add to its clock: the acquire fails after the ack ran
    with pytest.raises(GatewayError):
        await settle_then_acquire(store, [first], G, "c", "B", "soon", "h")  # type: ignore[arg-type]

    assert await _wakes(store.client, listener) == [f"{G}|c"]
    settled = await store.settle(LeaseKey(G, "c", first.partition_key, "A"), "ack")
    assert (settled.status, settled.values) == ("already", (56, "acked"))
