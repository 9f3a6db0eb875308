"""The Lua scripts against a real redis-server, checked against the pure model."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.crc import key_slot

from tests.support.gateway_redis import flushed_store, model_view
from tubemq_aio.gateway.errors import StateLostError, StoreUnavailableError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking, GroupState
from tubemq_aio.gateway.leases.redis_keys import cursor_lock_key, scope_keys
from tubemq_aio.gateway.leases.replies import Reply
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

PARTS = ["1:t:0", "1:t:1", "2:t:0", "2:t:1"]


@pytest_asyncio.fixture(loop_scope="module")
async def store(redis_server: RedisServer) -> AsyncIterator[LeaseStore]:
    async with flushed_store(redis_server) as (_, lease_store):
        yield lease_store


def _flat(reply: Reply) -> tuple[Any, ...]:
    return (reply.status, *reply.values)


async def _live_lease(
    store: LeaseStore,
    model: GroupState,
    rng: random.Random,
    tokens: list[Any],
    s: str,
    chosen: tuple[str, str],
) -> tuple[str, str]:
    """A lease likely still live for an operation that needs one: mostly the newest, half the
    time a fresh long one (as a fetch takes), else ``chosen``."""
    p, lid = tokens[-1] if rng.random() < 0.7 else chosen
    if rng.random() < 0.5:
        fresh = f"L{rng.getrandbits(32)}"
        r = await store.acquire("g", s, fresh, 60_000, "h")
        assert _flat(r) == model.acquire(r.now, s, fresh, 60_000, "h")
        if r.status == "leased":
            p, lid = str(r.values[0]), fresh
            tokens.append((p, lid))
    return p, lid


async def _step(
    store: LeaseStore,
    model: GroupState,
    rng: random.Random,
    tokens: list[Any],
    s: str,
    marks: list[tuple[str, str]],
) -> str:
    g = "g"
    op = rng.choice(
        ["acquire"] * 4
        + ["init", "record", "record", "settle", "settle", "extend"]
        + ["rewind"] * 2
        + ["sync", "reset", "rate", "pause", "sleep"]
        + ["read_ahead", "read_ahead_done"] * 2
    )
    if op == "sleep":
        await asyncio.sleep(rng.choice([0.0, 0.005, 0.02]))
        return op
    if op == "acquire":
        lid = f"L{rng.getrandbits(32)}"
        lease_ms = rng.choice([5, 20, 60_000])
        want = rng.choice(["", "", "", rng.choice(PARTS)])
        r = await store.acquire(g, s, lid, lease_ms, "h", want)
        expect = model.acquire(r.now, s, lid, lease_ms, "h", want)
        if r.status == "leased":
            tokens.append((r.values[0], lid))
    elif op == "sync":
        plist = sorted(rng.sample(PARTS, rng.randint(0, len(PARTS))))
        r = await store.sync_parts(g, s, plist)
        expect = model.sync_parts(r.now, s, plist)
    elif op == "rate":
        rate, burst = rng.choice([(0.0, 1), (50.0, 3), (1000.0, 10)])
        r = await store.set_rate(g, rate, burst)
        model.set_rate(r.now, rate, burst)
        return op
    elif op == "pause":
        flag = rng.random() < 0.3
        await store.set_paused(g, flag)
        model.paused = flag
        return op
    elif op == "reset":
        if rng.random() < 0.5:
            target, pairs = rng.choice(["earliest", "latest"]), []
        else:
            target, pairs = "", [(rng.choice(PARTS), rng.randrange(0, 2000, 28))]
        r = await store.reset(g, s, target, pairs, [])
        got = model.reset(r.now, s, target, pairs, [])
        assert r.values == tuple(x for row in got for x in row)
        return op
    elif op == "read_ahead_done":
        live = [(q, tok) for q, tok in marks if model.reading.get(q, "").startswith(tok + "|")]
        if live and rng.random() < 0.6:  # a read-ahead still marked ends
            p, token = rng.choice(live)
        else:
            p, token = rng.choice(marks) if marks and rng.random() < 0.8 else (PARTS[0], "x")
        kept = rng.choice(["", f"{token}|{rng.randrange(0, 500, 28)}"])
        cursor = rng.choice([-1, rng.randrange(0, 500, 28)])
        r = await store.read_ahead_done(g, s, p, token, kept, cursor)
        expect = model.read_ahead_done(r.now, s, p, token, kept, cursor)
    else:
        if not tokens:
            return op
        p, lid = rng.choice(tokens)
        if op == "read_ahead":
            p, lid = await _live_lease(store, model, rng, tokens, s, (p, lid))
            if model.scope(s).part(p).committed is None and rng.random() < 0.8:
                r = await store.init(LeaseKey(g, s, p, lid), 0, 280)
                assert _flat(r) == model.init(r.now, s, p, lid, 0, 280), op
            cmt = model.scope(s).part(p).committed
            if cmt is not None and rng.random() < 0.7:  # book a batch first, as a fetch does
                booking = Booking(cmt, cmt + 28, cmt + 56, 1, 0, cmt + 28)
                r = await store.record(LeaseKey(g, s, p, lid), booking)
                assert _flat(r) == model.record(r.now, s, p, lid, booking), op
            token = rng.choice(marks)[1] if marks and rng.random() < 0.2 else f"R{len(marks)}"
            allow_ms = rng.choice([5, 20, 60_000, 60_000])
            r = await store.read_ahead(LeaseKey(g, s, p, lid), token, allow_ms)
            expect = model.read_ahead(r.now, s, p, lid, token, allow_ms)
            marks.append((p, token))
        elif op == "init":
            off = rng.randrange(0, 2000, 28)
            r = await store.init(LeaseKey(g, s, p, lid), off, off + 280)
            expect = model.init(r.now, s, p, lid, off, off + 280)
        elif op == "record":
            cmt = model.scope(s).part(p).committed
            base = cmt if cmt is not None and rng.random() < 0.9 else rng.randrange(0, 500, 28)
            nxt = base + rng.choice([0, 28, 280])
            n = rng.choice([0, 1, 5])
            cur = rng.choice([-1, nxt])
            kept = rng.choice(["", f"T{rng.getrandbits(16)}|{nxt}"])
            booking = Booking(base, nxt, nxt + 28, n, 400, cur, kept)
            r = await store.record(LeaseKey(g, s, p, lid), booking)
            expect = model.record(r.now, s, p, lid, booking)
        elif op == "rewind":
            p, lid = await _live_lease(store, model, rng, tokens, s, (p, lid))
            cmt = model.scope(s).part(p).committed
            old = cmt if cmt is not None and rng.random() < 0.8 else rng.randrange(0, 500, 28)
            new = old - rng.choice([28, 280, 0, -28])
            r = await store.rewind(LeaseKey(g, s, p, lid), old, new, new + 56)
            expect = model.rewind(r.now, s, p, lid, old, new, new + 56)
        elif op == "settle":
            action = rng.choice(["ack", "ack", "nack", "release"])
            delay = rng.choice([0, 10])
            r = await store.settle(LeaseKey(g, s, p, lid), action, delay)
            expect = model.settle(r.now, s, p, lid, action, delay)
        else:
            lease_ms = rng.choice([5, 60_000])
            r = await store.extend(LeaseKey(g, s, p, lid), lease_ms)
            expect = model.extend(r.now, s, p, lid, lease_ms)
    assert _flat(r) == expect, op
    return op


@pytest.mark.parametrize("scope", ["c", "b:client-1"])
@pytest.mark.parametrize("seed", range(8))
async def test_scripts_match_the_model_field_by_field(
    store: LeaseStore, seed: int, scope: str
) -> None:
    # A clustering scope and a broadcast one (a client_id's own partitions and leases, the
    # group's shared cursor and rate limit) take the same scripts.
    rng = random.Random(seed)
    model = GroupState()
    await store.boot(["g"], allow_init=True)
    model.boot()
    tokens: list[Any] = []
    marks: list[tuple[str, str]] = []  # (partition, read-ahead token) ever marked
    for i in range(60):
        op = await _step(store, model, rng, tokens, scope, marks)
        real = await store.dump("g", scope)
        assert model_view(real, scope) == model_view(model, scope), (seed, i, op)


async def test_rewind_matches_the_model_field_by_field(store: LeaseStore) -> None:
    g, s, p = "g", "c", "1:t:0"
    model = GroupState()
    await store.boot([g], allow_init=True)
    model.boot()
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("sync_parts", ([p],)),
        ("acquire", ("A", 60_000, "h")),
        ("init", (p, "A", 0, 560)),
        ("record", (p, "A", 0, 560, 560, 20, 400, 560)),
        ("settle", (p, "A", "ack")),
        ("acquire", ("B", 60_000, "h")),
        ("rewind", (p, "A", 560, 280, 280)),  # an old token: stale
        ("rewind", (p, "B", 500, 280, 280)),  # not the committed offset: moved
        ("rewind", (p, "B", 560, 600, 600)),  # not backwards: moved
        ("rewind", (p, "B", 560, 280, 300)),
        ("rewind", (p, "B", 560, 280, 300)),  # a retry: ok, nothing changes
        ("settle", (p, "A", "ack")),  # already (settled before the rewind)
        ("record", (p, "B", 280, 336, 336, 2, 400, 336)),
        ("rewind", (p, "B", 280, 0, 0)),  # a booked batch: moved
        ("settle", (p, "B", "ack")),
    ]
    for name, args in calls:
        if name in ("sync_parts", "acquire"):
            r = await getattr(store, name)(g, s, *args)
        elif name == "record":  # the batch read travels as one Booking
            r = await store.record(LeaseKey(g, s, *args[:2]), Booking(*args[2:]))
        else:  # a lease's own scripts take its key
            r = await getattr(store, name)(LeaseKey(g, s, *args[:2]), *args[2:])
        if name == "record":
            expect = model.record(r.now, s, str(args[0]), str(args[1]), Booking(*args[2:]))
        else:
            expect = getattr(model, name)(r.now, s, *args)
        assert _flat(r) == expect, name
        assert model_view(await store.dump(g, s), s) == model_view(model, s), (name, args)
    assert model.scope(s).part(p).committed == 336


async def test_500_concurrent_acquirers_never_share_a_partition(redis_server: RedisServer) -> None:
    pool = aioredis.BlockingConnectionPool.from_url(
        redis_server.url, max_connections=64, timeout=20
    )
    store = LeaseStore(aioredis.Redis(connection_pool=pool), timeout=30.0)
    await store.client.flushall()
    await store.boot(["g"], allow_init=True)
    parts = [f"1:t:{i}" for i in range(8)]
    await store.sync_parts("g", "c", parts)
    replies = await asyncio.gather(
        *(store.acquire("g", "c", f"L{i}", 60_000, "h") for i in range(500))
    )
    won = [r.values[0] for r in replies if r.status == "leased"]
    assert sorted(won) == parts
    assert {r.status for r in replies} == {"leased", "none"}
    # release all, then race again with leases that expire at once
    for r, i in zip(replies, range(500), strict=True):
        if r.status == "leased":
            assert (
                await store.settle(LeaseKey("g", "c", r.values[0], f"L{i}"), "release")
            ).status == ("released")
    replies = await asyncio.gather(*(store.acquire("g", "c", f"M{i}", 1, "h") for i in range(500)))
    state = await store.dump("g", "c")
    sc = state.scopes["c"]
    assert len(sc.acq) == len(set(sc.acq.values()))
    assert not set(sc.ready) & set(sc.leased)
    # leases of 1 ms expire and are taken again, but the intervals of one partition never
    # overlap: each lease starts at or after the previous one's expiry (Redis clock)
    spans: dict[str, list[tuple[int, int]]] = {}
    for r in replies:
        if r.status == "leased":
            spans.setdefault(r.values[0], []).append((r.now, r.values[2]))
    assert set(spans) <= set(parts)
    for rows in spans.values():
        rows.sort()
        for (_, end), (begin, _) in itertools.pairwise(rows):
            assert begin >= end
    await store.client.aclose()
    await pool.disconnect()


async def test_every_script_is_idempotent(store: LeaseStore) -> None:
    g, s, p = "g", "c", "1:t:0"
    await store.boot([g], allow_init=True)

    async def twice(call: Any) -> tuple[Reply, Reply]:
        first = await call()
        before = model_view(await store.dump(g, s), s)
        second = await call()
        after = model_view(await store.dump(g, s), s)
        for st in (before, after):
            st["ready"] = sorted(st["ready"])  # a re-queue time is "now"
        assert before == after
        return first, second

    a, b = await twice(lambda: store.sync_parts(g, s, [p]))
    assert (a.values, b.values) == ((1, 0), (0, 0))
    a, b = await twice(lambda: store.acquire(g, s, "A", 60_000, "h"))
    assert a.values == b.values
    a, b = await twice(lambda: store.init(LeaseKey(g, s, p, "A"), 28, 280))
    assert a.values == b.values == (28,)
    a, b = await twice(
        lambda: store.record(LeaseKey(g, s, p, "A"), Booking(28, 84, 280, 2, 400, 84))
    )
    assert (a.status, b.status) == ("ok", "ok")
    a, b = await twice(lambda: store.settle(LeaseKey(g, s, p, "A"), "ack"))
    assert (a.status, b.status, b.values) == ("acked", "already", (84, "acked"))
    await store.acquire(g, s, "B", 60_000, "h")
    a, b = await twice(
        lambda: store.record(LeaseKey(g, s, p, "B"), Booking(84, 112, 280, 0, 0, 112))
    )
    assert (a.status, b.status, b.values) == ("released", "released", (112,))
    await store.acquire(g, s, "C", 60_000, "h")
    first = await store.extend(LeaseKey(g, s, p, "C"), 30_000)
    second = await store.extend(LeaseKey(g, s, p, "C"), 30_000)
    assert (first.status, second.status) == ("ok", "ok")
    await store.settle(LeaseKey(g, s, p, "C"), "release")
    assert (await store.acquire(g, s, "D", 60_000, "h")).status == "leased"
    a, b = await twice(lambda: store.rewind(LeaseKey(g, s, p, "D"), 112, 56, 60))
    assert (a.status, b.status, b.values) == ("ok", "ok", (56,))
    a, b = await twice(lambda: store.record(LeaseKey(g, s, p, "D"), Booking(56, 56, 60, 0, 0, 56)))
    assert (a.status, b.status, b.values) == ("released", "released", (56,))
    a, b = await twice(lambda: store.reset(g, s, "", [(p, 0)], []))
    assert a.values[2] == b.values[2] == "0"
    assert (await store.dump(g, s)).scopes[s].parts[p].committed == 0


async def test_scripts_reload_after_script_flush(store: LeaseStore) -> None:
    await store.boot(["g"], allow_init=True)
    await store.sync_parts("g", "c", ["1:t:0"])
    await store.client.script_flush()
    assert (await store.acquire("g", "c", "A", 60_000, "h")).status == "leased"


async def test_flushed_store_is_state_lost_until_reset(store: LeaseStore) -> None:
    await store.boot(["g"], allow_init=True)
    await store.sync_parts("g", "c", ["1:t:0"])
    got = await store.acquire("g", "c", "A", 60_000, "h")
    await store.init(LeaseKey("g", "c", "1:t:0", "A"), 280, 560)
    await store.client.flushall()
    with pytest.raises(StateLostError):
        await store.acquire("g", "c", "B", 60_000, "h")
    with pytest.raises(StateLostError):
        await store.settle(LeaseKey("g", "c", got.values[0], "A"), "ack")
    await store.boot(["g"], allow_init=False)  # a restart without allow_init does not hide it
    with pytest.raises(StateLostError):
        await store.sync_parts("g", "c", ["1:t:0"])
    await store.reset("g", "c", "earliest", [], ["1:t:0"])
    got = await store.acquire("g", "c", "C", 60_000, "h")
    assert got.values[:2] == ("1:t:0", -1)
    assert got.values[4] == "earliest"


async def test_keys_of_a_group_share_one_cluster_slot() -> None:
    keys = scope_keys("grp", "c") + scope_keys("grp", "b:client}{x")
    assert len({key_slot(k.encode()) for k in keys}) == 1


async def test_kill_and_restart_is_unavailable_then_recovers_without_going_back() -> None:
    async with RedisServer() as srv:
        client = aioredis.Redis.from_url(srv.url, socket_timeout=5, socket_connect_timeout=5)
        store = LeaseStore(client, timeout=10.0)
        try:
            await store.boot(["g"], allow_init=True)
            await store.sync_parts("g", "c", ["1:t:0"])
            cmt = 0
            for i in range(5):
                got = await store.acquire("g", "c", f"A{i}", 60_000, "h")
                if i == 0:
                    await store.init(LeaseKey("g", "c", "1:t:0", "A0"), 0, 0)
                await store.record(
                    LeaseKey("g", "c", "1:t:0", f"A{i}"), Booking(cmt, cmt + 28, cmt + 28, 1, 0, -1)
                )
                assert (
                    await store.settle(LeaseKey("g", "c", got.values[0], f"A{i}"), "ack")
                ).status == ("acked")
                cmt += 28
            await srv.kill()
            with pytest.raises(StoreUnavailableError):
                await store.acquire("g", "c", "B", 60_000, "h")
            with pytest.raises(StoreUnavailableError):
                await store.settle(LeaseKey("g", "c", "1:t:0", "A4"), "ack")
            await srv.restart()
            assert (
                await store.settle(LeaseKey("g", "c", "1:t:0", "A4"), "ack")
            ).status == "already"
            got = await store.acquire("g", "c", "B", 60_000, "h")
            assert got.values[:2] == ("1:t:0", cmt)  # nothing acked was lost
        finally:
            await client.aclose()


async def test_a_broadcast_booking_is_fenced_by_the_cursor_mutex(store: LeaseStore) -> None:
    g, s, p = "gf", "b:x", "1:t:0"
    await store.boot([g], allow_init=True)
    await store.sync_parts(g, s, [p])
    assert (await store.acquire(g, s, "L1", 60_000, "h")).status == "leased"
    await store.init(LeaseKey(g, s, p, "L1"), 0, 280)
    key = cursor_lock_key(g, p)
    assert await store.try_lock(key, "tok-a", 60_000)
    await store.client.delete(key)  # A's mutex lapsed; B takes it
    assert await store.try_lock(key, "tok-b", 60_000)
    assert not await store.renew_lock(key, "tok-a", 60_000)
    fenced = await store.record(
        LeaseKey(g, s, p, "L1"), Booking(0, 56, 280, 2, 0, 56), fence=(key, "tok-a")
    )
    assert fenced.status == "fenced"
    state = await store.dump(g, s)
    assert state.scopes[s].parts[p].batch_start is None  # nothing booked
    assert p not in state.cursor
    assert await store.renew_lock(key, "tok-b", 60_000)
    booked = await store.record(
        LeaseKey(g, s, p, "L1"), Booking(0, 56, 280, 2, 0, 56), fence=(key, "tok-b")
    )
    assert booked.status == "ok"


async def test_the_kept_batch_fence_is_handed_to_one_lease_only(store: LeaseStore) -> None:
    g, s, p = "g", "c", "1:t:0"
    await store.boot([g], allow_init=True)
    await store.sync_parts(g, s, [p])
    await store.acquire(g, s, "L1", 60_000, "r1")
    await store.init(LeaseKey(g, s, p, "L1"), 0, 280)
    kept = "tok|56"
    booked = await store.record(LeaseKey(g, s, p, "L1"), Booking(0, 56, 280, 2, 0, 56, kept))
    assert booked.status == "ok"
    assert (await store.dump(g, s)).fence == {p: kept}
    await store.settle(LeaseKey(g, s, p, "L1"), "ack")
    first = await store.acquire(g, s, "L2", 60_000, "r2")
    assert first.leased().fence == kept
    assert first.leased().committed == 56
    again = await store.acquire(g, s, "L2", 60_000, "r2")  # a retry: the fence is gone
    assert again.leased().fence == ""
    assert (await store.dump(g, s)).fence == {}
    moved = await store.record(LeaseKey(g, s, p, "L2"), Booking(0, 56, 280, 2, 0, 56, kept))
    assert moved.status == "moved"
    assert (await store.dump(g, s)).fence == {}


Check = Callable[[Reply, tuple[Any, ...]], Awaitable[None]]


async def _twin(store: LeaseStore, g: str, s: str) -> tuple[GroupState, Check]:
    """The booted store's model of group ``g``, and a check that a script's reply is the
    model's and that the scope ``s`` of both is the same after it."""
    model = GroupState()
    await store.boot([g], allow_init=True)
    model.boot()

    async def check(r: Reply, expect: tuple[Any, ...]) -> None:
        assert _flat(r) == expect
        assert model_view(await store.dump(g, s), s) == model_view(model, s)

    return model, check


async def test_an_acquire_passes_over_reads_in_flight_as_the_model_does(store: LeaseStore) -> None:
    # 20 partitions due first, each with a read-ahead in flight (more than one chunk of the
    # script's scan), then 20 without: the acquire skips the first ones, and once the others
    # are leased answers when the earliest mark ends.
    g, s = "g", "c"
    marked = [f"1:t:{i:02d}" for i in range(20)]
    free = [f"2:t:{i:02d}" for i in range(20)]
    model, check = await _twin(store, g, s)
    r = await store.sync_parts(g, s, marked)
    await check(r, model.sync_parts(r.now, s, marked))
    for i, p in enumerate(marked):
        key = LeaseKey(g, s, p, f"L{i}")
        r = await store.acquire(g, s, key.lease_id, 60_000, "h", p)
        await check(r, model.acquire(r.now, s, key.lease_id, 60_000, "h", p))
        r = await store.init(key, 0, 280)
        await check(r, model.init(r.now, s, p, key.lease_id, 0, 280))
        booking = Booking(0, 28, 280, 1, 0, 28)
        r = await store.record(key, booking)
        await check(r, model.record(r.now, s, p, key.lease_id, booking))
        r = await store.read_ahead(key, f"R{i}", 60_000 + i)
        await check(r, model.read_ahead(r.now, s, p, key.lease_id, f"R{i}", 60_000 + i))
        r = await store.settle(key, "ack")
        await check(r, model.settle(r.now, s, p, key.lease_id, "ack"))
    r = await store.sync_parts(g, s, marked + free)  # ready now: due after the marked ones
    await check(r, model.sync_parts(r.now, s, marked + free))
    for i in range(len(free)):
        r = await store.acquire(g, s, f"F{i}", 60_000, "h")
        await check(r, model.acquire(r.now, s, f"F{i}", 60_000, "h"))
        assert r.values[0] == free[i]
    r = await store.acquire(g, s, "N", 60_000, "h")
    await check(r, model.acquire(r.now, s, "N", 60_000, "h"))
    assert r.status == "none"
    r = await store.read_ahead_done(g, s, marked[3], "R3", "R3|28", 56)
    await check(r, model.read_ahead_done(r.now, s, marked[3], "R3", "R3|28", 56))
    r = await store.acquire(g, s, "M", 60_000, "h")
    await check(r, model.acquire(r.now, s, "M", 60_000, "h"))
    assert r.values[0] == marked[3]
    with pytest.raises(ValueError, match="token"):
        await store.read_ahead(LeaseKey(g, s, marked[0], "L0"), "", 10)


async def test_a_reset_holds_a_reading_lease_partition_as_the_model_does(
    store: LeaseStore,
) -> None:
    # A lease with no batch booked (its holder may still be reading) and one with a batch
    # booked (its reads are over), both reset: the first partition waits for its old lease's
    # end, the second is leased again at once; after the end, the acquire forgets the cursor.
    g, s = "g", "c"
    reading, done = "1:t:0", "1:t:1"
    model, check = await _twin(store, g, s)
    r = await store.sync_parts(g, s, [reading, done])
    await check(r, model.sync_parts(r.now, s, [reading, done]))
    for p, lid, lease_ms in ((done, "D", 60_000), (reading, "R", 300)):
        r = await store.acquire(g, s, lid, lease_ms, "h", p)
        await check(r, model.acquire(r.now, s, lid, lease_ms, "h", p))
        r = await store.init(LeaseKey(g, s, p, lid), 0, 280)
        await check(r, model.init(r.now, s, p, lid, 0, 280))
    lexp = model.scope(s).part(reading).lease_expiry
    booking = Booking(0, 28, 280, 1, 0, 28)
    r = await store.record(LeaseKey(g, s, done, "D"), booking)
    await check(r, model.record(r.now, s, done, "D", booking))
    r = await store.reset(g, s, "", [(reading, 56), (done, 56)], [])
    got = model.reset(r.now, s, "", [(reading, 56), (done, 56)], [])
    assert r.values == tuple(x for row in got for x in row)
    assert (await store.dump(g, s)).reading == {reading: f"|{lexp}"}
    assert model_view(await store.dump(g, s), s) == model_view(model, s)
    r = await store.acquire(g, s, "A", 60_000, "h")
    await check(r, model.acquire(r.now, s, "A", 60_000, "h"))
    assert r.values[:2] == (done, 56)
    r = await store.acquire(g, s, "B", 60_000, "h")
    await check(r, model.acquire(r.now, s, "B", 60_000, "h"))
    assert (r.status, r.values[0]) == ("none", lexp)
    r = await store.record(LeaseKey(g, s, reading, "R"), booking)  # the old holder: stale
    await check(r, model.record(r.now, s, reading, "R", booking))
    assert r.status == "stale"
    await asyncio.sleep(max(0.0, (lexp - r.now) / 1000) + 0.01)
    r = await store.acquire(g, s, "C", 60_000, "h")
    await check(r, model.acquire(r.now, s, "C", 60_000, "h"))
    assert (r.status, r.values[0], r.values[1]) == ("leased", reading, 56)
    assert (await store.dump(g, s)).reading == {}


async def test_setting_the_rate_again_keeps_the_read_in_flight_and_what_is_owed(
    store: LeaseStore,
) -> None:
    """The rate PUT used to delete the hold of the read in flight and the schedule: a second
    read started before the first was booked, and each PUT handed out a fresh burst."""
    g, s = "g", "c"
    await store.boot([g], allow_init=True)
    await store.sync_parts(g, s, PARTS[:2])
    await store.set_rate(g, 200.0, 100)
    first = await store.acquire(g, s, "A", 20_000, "h")
    assert first.status == "leased"
    await store.set_rate(g, 200.0, 100)
    assert (await store.acquire(g, s, "B", 20_000, "h")).status == "held"
    key = LeaseKey(g, s, str(first.values[0]), "A")
    assert (await store.init(key, 0, 50_000)).status == "ok"
    assert (await store.record(key, Booking(0, 14_000, 14_000, 500))).status == "ok"
    await store.set_rate(g, 200.0, 100)
    again = await store.acquire(g, s, "B", 20_000, "h")
    assert again.status == "throttled"
    assert again.wait_ms > 1500  # 500 messages at 200/s, less the burst's 0.5 s
