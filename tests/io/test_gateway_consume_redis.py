"""ConsumeService with a real Redis and no reachable TubeMQ: validation before any I/O, and
settle/extend/reset/pause/rate/lag working with Redis alone (acks while the cluster is down)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.gateway_engine_support import answers_settled
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.__main__ import main as gateway_main
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import (
    MAX_OFFSET,
    MIN_RATE,
    ConsumeSettings,
    FetchArgs,
    FetchQuery,
)
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.errors import (
    InvalidRequestError,
    LeaseConflictError,
    LeaseStaleError,
    StateLostError,
    StoreUnavailableError,
    TubeUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.tubemq.shared_id import shared_consumer_id
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.models import Message
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

NO_MASTER = "127.0.0.1:9"  # discard port: nothing listens, connects are refused at once
P = "1:t:0"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[RedisServer]:
    async with RedisServer() as srv:
        yield srv


def make(url: str, **kw: Any) -> ConsumeService:
    groups = (
        GroupSpec(name="gg", topics=("t",), lease_ms_min=100, lease_ms=60_000),
        GroupSpec(name="bb", topics=("t",), mode="broadcast"),
    )
    kw.setdefault("allow_init", True)  # these tests start on an emptied Redis
    return ConsumeService(
        ConsumeSettings(masters=NO_MASTER, redis=url, groups=groups, rpc_timeout=3.0, **kw)
    )


@pytest_asyncio.fixture(loop_scope="module")
async def service(server: RedisServer) -> AsyncIterator[ConsumeService]:
    await server.flushall()
    svc = make(server.url)
    await svc.start()
    yield svc
    await svc.close()


async def lease_by_hand(svc: ConsumeService, lid: str, base: int = 0, nxt: int = 56) -> LeaseKey:
    """What a fetch would have done, written straight into Redis (no TubeMQ here)."""
    store = svc.store
    assert store is not None
    await store.sync_parts("gg", "c", [P])
    got = await store.acquire("gg", "c", lid, 60_000, "tester")
    assert got.status == "leased"
    await store.init(LeaseKey("gg", "c", P, lid), base, 280)
    assert (
        await store.record(LeaseKey("gg", "c", P, lid), Booking(base, nxt, 280, 2, 0, nxt))
    ).status == "ok"
    return LeaseKey("gg", "c", P, lid)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"group": "nope", "client_id": None}, UnknownGroupError),
        ({"group": "gg", "client_id": "x"}, InvalidRequestError),
        ({"group": "bb", "client_id": None}, InvalidRequestError),
        ({"group": "bb", "client_id": ""}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "wait_ms": -1}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "wait_ms": 30_001}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "wait_ms": 1.5}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "wait_ms": True}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "lease_ms": 99}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "lease_ms": 43_200_001}, InvalidRequestError),
        ({"group": "gg", "client_id": None, "lease_ms": float("nan")}, InvalidRequestError),
    ],
)
async def test_bad_fetch_arguments_fail_before_any_io(kwargs: dict[str, Any], error: type) -> None:
    svc = make("redis://127.0.0.1:9/0")  # never started: any I/O would fail differently
    with pytest.raises(error):
        await svc.fetch(FetchQuery(**kwargs))
    await svc.close()


async def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        GroupSpec(name="g", topics=("t",))  # TubeMQ group names have 2+ characters
    with pytest.raises(ConfigError):
        GroupSpec(name="gg", topics=())
    with pytest.raises(ConfigError):
        GroupSpec(name="gg", topics=("a,b",))
    with pytest.raises(ConfigError):
        GroupSpec(name="gg", topics=("t",), lease_ms=5)
    with pytest.raises(ConfigError):
        GroupSpec(name="gg", topics=("t",), mode="fanout")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ConsumeSettings(masters="m:1", redis="redis://x", rpc_timeout=math.inf)
    with pytest.raises(ConfigError):
        ConsumeSettings(masters="m:1", redis="redis://x", max_long_poll_waiters=-1)
    spec = GroupSpec(name="gg", topics=("t",))
    with pytest.raises(ConfigError):
        ConsumeSettings(masters="m:1", redis="redis://x", groups=(spec, spec))
    with pytest.raises(ConfigError):
        ConsumeSettings(masters="m:1", redis="redis://x", rpc_timeout=1.0)
    with pytest.raises(ConfigError):
        shared_consumer_id("bad_name", "g")  # "_" would break the broker's id parsing


async def test_acks_work_with_redis_alone(service: ConsumeService) -> None:
    ref = await lease_by_hand(service, "A" * 32)
    assert await service.extend(ref, 30_000) > 0
    assert await service.settle(ref, "ack") == "acked"
    assert await service.settle(ref, "ack") == "already_acked"
    with pytest.raises(LeaseStaleError):
        await service.extend(ref, 30_000)
    with pytest.raises(LeaseStaleError):
        await service.settle(LeaseKey("gg", "c", P, "B" * 32), "ack")
    lag = await service.lag("gg")
    assert [(e.partition_key, e.committed, e.max, e.lag_bytes) for e in lag.partitions] == [
        (P, 56, 280, 224)
    ]
    assert lag.total_lag_bytes == 224
    stats = service.stats()
    assert (stats.acks, stats.already_settled, stats.stale) == (1, 1, 2)


async def test_nack_and_release_redeliver_and_bad_settle_arguments(service: ConsumeService) -> None:
    ref = await lease_by_hand(service, "C" * 32)
    with pytest.raises(InvalidRequestError):
        await service.settle(ref, "drop")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        await service.settle(ref, "nack", delay_ms=-5)
    with pytest.raises(InvalidRequestError):
        await service.extend(ref, 10)
    with pytest.raises(UnknownGroupError):
        await service.settle(LeaseKey("zz", "c", P, "C" * 32), "ack")
    assert await service.settle(ref, "nack", delay_ms=0) == "nacked"
    state = await service.store.dump("gg", "c")
    assert state.scopes["c"].parts[P].redeliveries == 1
    assert state.scopes["c"].parts[P].committed == 0


async def test_reset_makes_outstanding_tokens_409(service: ConsumeService) -> None:
    ref = await lease_by_hand(service, "D" * 32)
    with pytest.raises(InvalidRequestError):
        await service.reset("gg", {P: -1})
    with pytest.raises(InvalidRequestError):
        await service.reset("gg", "middle")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        await service.reset("gg", {"9:t:9": 0})  # unknown partition
    out = await service.reset("gg", {P: 28})
    assert [(e.partition_key, e.old, e.new) for e in out] == [(P, 0, 28)]
    with pytest.raises((LeaseStaleError, LeaseConflictError)):
        await service.settle(ref, "ack")
    out = await service.reset("gg", "latest")
    assert [(e.partition_key, e.old, e.new) for e in out] == [(P, 28, "latest")]


async def test_offsets_beyond_what_the_store_holds_exactly_are_refused(
    service: ConsumeService,
) -> None:
    """Lua keeps numbers as doubles: 2**53 + 1 came back as 2**53, 2**63 as -2**63 (read as
    "no committed offset", i.e. a silent restart from the group's start)."""
    await service.store.sync_parts("gg", "c", [P])
    for off in (MAX_OFFSET + 1, 2**63 - 1, 2**63, 10**30):
        with pytest.raises(InvalidRequestError):
            await service.reset("gg", {P: off})
    out = await service.reset("gg", {P: MAX_OFFSET})
    assert [(e.partition_key, e.new) for e in out] == [(P, MAX_OFFSET)]
    assert [e.committed for e in (await service.lag("gg")).partitions] == [MAX_OFFSET]


async def test_unknown_partitions_are_named_but_not_echoed_in_full(
    service: ConsumeService,
) -> None:
    await service.store.sync_parts("gg", "c", [P])
    with pytest.raises(InvalidRequestError) as err:
        await service.reset("gg", {("x" * 100_000) + str(i): 0 for i in range(1000)})
    assert "and 997 more" in str(err.value)
    assert len(str(err.value)) < 500


async def test_a_tiny_rate_is_refused_not_silently_unlimited(service: ConsumeService) -> None:
    """A rate of 1e-300 used to let everything through: the limiter's µs schedule (doubles in
    Redis) lost a 1e306 µs interval against the clock."""
    for rate in (5e-324, 1e-300, MIN_RATE / 2):
        with pytest.raises(InvalidRequestError):
            await service.set_rate("gg", rate, None)
    store = service.store
    assert store is not None
    await store.sync_parts("gg", "c", [P])
    await service.set_rate("gg", MIN_RATE, None)
    for i in range(3):  # each batch of 1 message charges the limiter 1000 s
        lid = f"{i:032x}"
        got = await store.acquire("gg", "c", lid, 60_000, "h")
        if i == 2:
            assert got.status == "throttled"
            assert int(got.values[0]) > 900_000  # ms until the next message is allowed
            break
        assert got.status == "leased"
        cmt = int(got.values[1])
        if cmt < 0:
            await store.init(LeaseKey("gg", "c", P, lid), 0, 100_000)
            cmt = 0
        rec = await store.record(
            LeaseKey("gg", "c", P, lid), Booking(cmt, cmt + 28, 100_000, 1, 0, cmt + 28)
        )
        assert rec.status == "ok"
        assert await service.settle(LeaseKey("gg", "c", P, lid), "ack") == "acked"
    await service.set_rate("gg", 0, None)


async def test_cancel_after_the_acquire_script_ran_gives_the_lease_back(
    service: ConsumeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch cancelled (its HTTP client left) while the acquire's answer is on its way: the
    lease the script took is released at once, not left for the lease to expire."""
    store = service.store
    assert store is not None
    await store.sync_parts("gg", "c", [P])
    real_acquire = store.acquire
    ran = asyncio.Event()

    async def acquire_then_stall(*args: Any, **kw: Any) -> Any:
        got = await real_acquire(*args, **kw)
        ran.set()
        await asyncio.Event().wait()  # the answer never arrives; the cancel lands here
        return got

    monkeypatch.setattr(store, "acquire", acquire_then_stall)
    spec = service._spec("gg")
    task = asyncio.create_task(
        service._reader.fetch_once(FetchArgs(spec, "c", 60_000, "gone"), store)
    )
    await asyncio.wait_for(ran.wait(), 5)
    assert [e.lease_holder for e in (await service.lag("gg")).partitions] == ["gone"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.lease_holder for e in (await service.lag("gg")).partitions] == [None]
    monkeypatch.undo()
    got = await store.acquire("gg", "c", "E" * 32, 60_000, "next")
    assert got.status == "leased"
    assert got.values[0] == P
    assert int(got.values[3]) == 0  # no redelivery: the batch was never handed out


class _SlowTube:
    """A TubeMQ stand-in whose register and read each take a few loop turns."""

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        for _ in range(3):
            await asyncio.sleep(0)
        return 0, 280

    async def read(
        self,
        key: str,
        start: int,
        *,
        cursor_at_start: bool,
        max_messages: int = 1,
        gather_until: float = 0.0,
    ) -> TubeRead:
        for _ in range(3):
            await asyncio.sleep(0)
        batch = (Message(topic="t", body=b"x", message_id=1, partition_key=key),)
        return TubeRead("ok", start, start + 28, 280, batch, rpcs=1)


@pytest.mark.parametrize(("group", "client_id"), [("gg", None), ("bb", "c1")])
async def test_a_fetch_cancelled_at_any_await_leaves_no_lease(
    service: ConsumeService, monkeypatch: pytest.MonkeyPatch, group: str, client_id: str | None
) -> None:
    """Cancel the read path after 0, 1, 2, ... loop turns (acquire, cursor mutex in broadcast,
    init, register, read, record and the awaits inside them): each time the lease and the
    cursor mutex are given back at once, or, when the cancel met the broker read, once an
    engine task saw the read answered (never left held, never held twice); a fetch that
    finished first returns its lease."""
    store = service.store
    assert store is not None
    scope = "c" if client_id is None else f"b:{client_id}"
    await store.sync_parts(group, scope, [P])

    async def tube_of(_spec: GroupSpec) -> _SlowTube:
        return _SlowTube()

    monkeypatch.setattr(service._reader, "_tube_of", tube_of)
    spec = service._spec(group)
    cancelled = finished = 0
    # at least 200 turns, and on until a fetch finished before its cancel (a new Redis
    # connection on the way costs turns more)
    for turns in range(2000):
        if turns >= 200 and finished:
            break
        task = asyncio.create_task(
            service._reader.fetch_once(FetchArgs(spec, scope, 60_000, "x"), store)
        )
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await answers_settled(service)
        if task.cancelled():
            cancelled += 1
        else:
            outcome = task.result()
            assert outcome.status == "ok"
            assert outcome.lease is not None
            finished += 1
            assert await service.settle(outcome.lease.key, "release") == "released"
        lag = await service.lag(group, client_id=client_id)
        holders = [e.lease_holder for e in lag.partitions]
        assert holders == [None], (turns, holders)
        assert not await store.client.exists(f"tgw:{{g:{group}}}:curlock:{P}"), turns
    assert cancelled > 50  # the cancel landed inside the read path that often
    assert finished > 0  # and the range reached past its end
    state = await store.dump(group, scope)
    assert state.scopes[scope].parts[P].redeliveries == 0  # releases, never counted as redeliveries


async def test_pause_rate_and_fetch_without_master(service: ConsumeService) -> None:
    await service.pause("gg")
    with pytest.raises(TubeUnavailableError):  # metadata comes from the master first
        await service.fetch(FetchQuery("gg", client_id=None))
    await service.resume("gg")
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(InvalidRequestError):
            await service.set_rate("gg", bad, None)
    with pytest.raises(InvalidRequestError):
        await service.set_rate("gg", 10.0, -1)
    await service.set_rate("gg", 10.0, None)
    state = await service.store.dump("gg", "c")
    assert (state.rate, state.burst, state.paused) == (10.0, 10, False)
    assert (await service.readiness(10.0)) == {"redis": True, "master": False}


async def test_flushed_redis_is_state_lost(server: RedisServer, service: ConsumeService) -> None:
    ref = await lease_by_hand(service, "E" * 32)
    await server.flushall()
    with pytest.raises(StateLostError):
        await service.settle(ref, "ack")
    assert service.stats().state_lost == 1
    restarted = make(server.url, allow_init=False)
    await restarted.start()
    try:
        with pytest.raises(StateLostError):
            await restarted.extend(ref, 30_000)
    finally:
        await restarted.close()


async def test_settle_answers_say_how_the_lease_really_ended(service: ConsumeService) -> None:
    nacked = await lease_by_hand(service, "N" * 32)
    assert await service.settle(nacked, "nack") == "nacked"
    with pytest.raises(LeaseStaleError, match="already nacked"):  # nothing was committed
        await service.settle(nacked, "ack")
    assert await service.settle(nacked, "nack") == "nacked"  # a retry: the same answer
    acked = await lease_by_hand(service, "A" * 32)
    assert await service.settle(acked, "ack") == "acked"
    assert await service.settle(acked, "nack") == "already_acked"  # no redelivery follows
    assert await service.settle(acked, "release") == "already_acked"
    after = await lease_by_hand(service, "B" * 32, base=56, nxt=84)  # the partition's next one
    assert await service.settle(after, "ack") == "acked"
    assert await service.settle(acked, "ack") == "already_acked"  # still known as acked
    state = await service.store.dump("gg", "c")
    assert state.scopes["c"].parts[P].committed == 84


@pytest.mark.parametrize("pool", [{}, {"redis_max_connections": 4}])
async def test_a_burst_over_the_pool_waits_instead_of_failing(
    server: RedisServer, pool: dict[str, int]
) -> None:
    await server.flushall()
    svc = make(server.url, **pool)
    await svc.start()
    try:
        ref = await lease_by_hand(svc, "P" * 32)
        # 300 round trips at once, more than the pool holds: each waits its turn, none is a 503
        got = await asyncio.gather(
            *(svc.lag("gg") for _ in range(150)),
            *(svc.extend(ref, 30_000) for _ in range(150)),
            return_exceptions=True,
        )
        assert [g for g in got if isinstance(g, BaseException)] == []
        assert svc.stats().store_errors == 0
    finally:
        await svc.close()


async def test_a_replica_started_after_a_loss_does_not_hide_it(
    server: RedisServer, service: ConsumeService
) -> None:
    assert ConsumeSettings(masters=NO_MASTER, redis=server.url).allow_init is False
    ref = await lease_by_hand(service, "G" * 32)
    await server.flushall()
    late = make(server.url, allow_init=False)  # what every production replica is
    await late.start()
    try:
        assert not await late.store.booted()
        for svc in (late, service):  # old and new replicas alike
            with pytest.raises(StateLostError):
                await svc.settle(ref, "ack")
        assert late.stats().state_lost == 1
        await late.reset("gg", "earliest")  # the admin decides where the group goes on
        with pytest.raises(LeaseStaleError):
            await service.settle(ref, "ack")
        with pytest.raises(StateLostError):  # lag of a lost group is no zero backlog
            await late.lag("bb", client_id="x")
        assert (await late.lag("gg")).total_lag_bytes == 0
    finally:
        await late.close()


async def test_init_command_marks_the_store_once(
    server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await server.flushall()
    config = tmp_path / "gw.toml"
    config.write_text(
        f'masters = "{NO_MASTER}"\nredis = "{server.url}"\nsecret = "{"s" * 32}"\n'
        'allow_anonymous = true\n[[groups]]\nname = "gg"\ntopics = ["t"]\n'
    )
    assert await asyncio.to_thread(gateway_main, ["init", "--config", str(config)]) == 0
    assert "initialised; groups marked: gg" in capsys.readouterr().out
    svc = make(server.url, allow_init=False)
    await svc.start()
    try:
        assert await svc.store.booted()
        assert (await svc.store.dump("gg", "c")).booted
    finally:
        await svc.close()
    assert await asyncio.to_thread(gateway_main, ["init", "--config", str(config)]) == 0
    assert "was already initialised" in capsys.readouterr().out
    produce_only = tmp_path / "produce.toml"  # no groups: no Redis to reach, nothing to do
    produce_only.write_text(
        f'masters = "{NO_MASTER}"\nredis = "redis://127.0.0.1:9/0"\nsecret = "{"s" * 32}"\n'
        "allow_anonymous = true\n"
    )
    assert await asyncio.to_thread(gateway_main, ["init", "--config", str(produce_only)]) == 0
    assert "uses no Redis store" in capsys.readouterr().out


async def test_redis_down_is_store_unavailable(server: RedisServer) -> None:
    await server.flushall()  # on its own: no lease left by whichever test ran before it
    svc = make(server.url)
    await svc.start()
    try:
        ref = await lease_by_hand(svc, "F" * 32)
        await server.kill()
        with pytest.raises(StoreUnavailableError):
            await svc.settle(ref, "ack")
        assert svc.stats().store_errors == 1
        assert (await svc.readiness(10.0))["redis"] is False
        await server.restart()
        assert await svc.settle(ref, "ack") == "acked"
    finally:
        await svc.close()
    await svc.close()  # idempotent
    with pytest.raises(StoreUnavailableError):
        await svc.fetch(FetchQuery("gg", client_id=None))
