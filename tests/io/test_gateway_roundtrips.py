"""The Redis round trips of the consume path, counted on the wire against a real redis-server:
a fetch that carries acks costs 2 (the acks and the acquire in one pipeline, then the record),
an ack sent alone costs 1. No TubeMQ here: a stand-in partition answers the reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any, ClassVar

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from tests.support.gateway_engine_support import answers_settled
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import ConsumeSettings, FetchOutcome, FetchQuery
from tubemq_aio.gateway.engine.port import PiggybackAcks
from tubemq_aio.gateway.engine.service import ConsumeService
from tubemq_aio.gateway.errors import LeaseStaleError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.redis_keys import WAKE_CHANNEL
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.models import Message
from tubemq_aio.testing import RedisServer, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

P = "1:t:0"


class CountingConnection(aioredis.Connection):
    """A Redis connection that counts what it writes: one write per round trip (a pipeline
    writes all its commands at once)."""

    writes: ClassVar[int] = 0

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        """Count, then send."""
        CountingConnection.writes += 1
        await super().send_packed_command(command, check_health)


class _Partition:
    """One partition of 100-byte messages that always has a batch of 4 at any offset."""

    async def partitions(self) -> list[str]:
        return [P]

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        return 0, 1 << 40

    async def read(
        self,
        key: str,
        start: int,
        *,
        cursor_at_start: bool,
        max_messages: int = 1,
        gather_until: float = 0.0,
    ) -> TubeRead:
        batch = tuple(
            Message(topic="t", body=b"x" * 100, message_id=start + i, partition_key=key)
            for i in range(4)
        )
        return TubeRead("ok", start, start + 4 * 128, 1 << 40, batch, rpcs=1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[RedisServer]:
    async with RedisServer() as srv:
        yield srv


@pytest_asyncio.fixture(loop_scope="module")
async def service(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ConsumeService]:
    await server.flushall()
    real = aioredis.BlockingConnectionPool.from_url.__func__  # type: ignore[attr-defined]

    def counting_pool(cls: type, url: str, /, **kw: Any) -> Any:
        return real(cls, url, connection_class=CountingConnection, **kw)

    monkeypatch.setattr(aioredis.BlockingConnectionPool, "from_url", classmethod(counting_pool))
    svc = ConsumeService(
        ConsumeSettings(
            masters="127.0.0.1:9",  # never asked: the stand-in partition answers
            redis=server.url,
            groups=(GroupSpec(name="gg", topics=("t",), lease_ms=60_000),),
            allow_init=True,
            sync_interval=600.0,  # one metadata sync, in the warm-up
        )
    )
    await svc.start()
    store = svc.store
    assert store is not None

    async def listening() -> bool:  # the wake listener's SUBSCRIBE is behind us
        subscribed = await store.client.pubsub_numsub(WAKE_CHANNEL)
        return bool(subscribed and subscribed[0][1] >= 1)

    await wait_until(listening, 30, "the wake listener subscribed")
    partition = _Partition()

    async def tube_of(_spec: GroupSpec) -> _Partition:
        return partition

    monkeypatch.setattr(svc.sessions, "get", tube_of)  # the metadata sync and the reads
    monkeypatch.setattr(svc._reader, "_tube_of", tube_of)
    yield svc
    await svc.close()


async def _fetch(svc: ConsumeService, acks: PiggybackAcks | None = None) -> FetchOutcome:
    outcome = await svc.fetch(FetchQuery("gg", None), acks=acks)
    assert outcome.status == "ok"
    assert outcome.lease is not None
    return outcome


def _ref(outcome: FetchOutcome) -> LeaseKey:
    assert outcome.lease is not None
    return outcome.lease.key


async def test_a_fetch_carrying_acks_costs_two_round_trips_an_ack_alone_one(
    service: ConsumeService,
) -> None:
    # warm-up: the metadata sync, the first offset, and every script loaded once
    first = await _fetch(service)
    assert await service.settle(_ref(first), "ack") == "acked"
    previous = await _fetch(service)
    assert CountingConnection.writes > 0  # the counting connections are the ones in use

    for _ in range(3):  # steady state: each fetch carries the ack of the one before
        acks = PiggybackAcks((_ref(previous),))
        before = CountingConnection.writes
        previous = await _fetch(service, acks)
        assert CountingConnection.writes - before == 2
        assert acks.results == ["acked"]

    two = PiggybackAcks((_ref(previous), _ref(first)))  # a fresh ack and a retried one
    before = CountingConnection.writes
    previous = await _fetch(service, two)
    assert CountingConnection.writes - before == 2
    assert two.results == ["acked", "already_acked"]

    before = CountingConnection.writes
    assert await service.settle(_ref(previous), "ack") == "acked"
    assert CountingConnection.writes - before == 1
    stats = service.stats()
    assert stats.piggyback_acks == 5
    assert stats.settle_redis_roundtrips == 2


async def test_carried_acks_survive_a_script_flush_and_report_their_own_errors(
    service: ConsumeService,
) -> None:
    """After ``SCRIPT FLUSH`` every command of the pipeline answers NOSCRIPT and did not run:
    each is sent again (loading its script), so the acks and the acquire still happen once;
    an ack whose lease was taken over answers its own error, not the fetch's."""
    held = await _fetch(service)
    store = service.store
    assert store is not None
    stale = LeaseKey("gg", "c", P, "f" * 32)  # a lease id this partition never had
    await store.client.script_flush()
    acks = PiggybackAcks((_ref(held), stale))
    after = await _fetch(service, acks)
    assert acks.results is not None
    assert acks.results[0] == "acked"
    assert isinstance(acks.results[1], LeaseStaleError)
    assert after.lease is not None
    assert after.lease.lease_id != _ref(held).lease_id
    assert await service.settle(_ref(after), "ack") == "acked"


#: The stand-in partition's batch of 4 messages spans 4 * 128 offsets.
BATCH_SPAN = 4 * 128


async def test_a_cancelled_fetch_still_settles_its_carried_ack(service: ConsumeService) -> None:
    """A fetch carrying an ack, cancelled a little later each time (before its round trip,
    while Redis runs the pipeline, while the answer comes back, during the read): the ack
    takes effect and says so (``already_acked`` when the cancelled round trip had applied it
    before the fetch settled it again), and settling it again answers already_acked; a fetch
    cancelled before it began touched nothing, and its ack is still to be made. The lease
    the cancelled fetch may have taken is given back, so the next fetch gets the partition at
    once and reads on right after the acked batch."""
    held = await _fetch(service)
    cancelled_after_a_write = 0
    for trial in range(40):
        acks = PiggybackAcks((_ref(held),))
        writes = CountingConnection.writes
        fetching = asyncio.create_task(service.fetch(FetchQuery("gg", None), acks=acks))
        for _ in range(2 * trial):  # one more loop iteration or two each time
            await asyncio.sleep(0)
        fetching.cancel()
        try:
            outcome: FetchOutcome | None = await fetching
        except asyncio.CancelledError:
            outcome = None
            cancelled_after_a_write += CountingConnection.writes > writes
        if acks.results is None:  # cancelled before the fetch began: nothing was touched
            assert trial == 0
            assert CountingConnection.writes == writes
        else:  # settled even when cancelled
            assert acks.results in (["acked"], ["already_acked"])
        start = held.messages[0].message_id
        if outcome is not None:  # it ran to the end before the cancel
            assert acks.results == ["acked"]
            assert outcome.status == "ok"
            held = outcome
        else:
            again = await service.settle(_ref(held), "ack")
            assert again == ("acked" if acks.results is None else "already_acked")
            await answers_settled(service)  # a cancel that met the read: given back once read
            held = await _fetch(service)  # not held by the cancelled fetch: ok at once
        assert held.messages[0].message_id == start + BATCH_SPAN  # acked once, nothing skipped
    assert cancelled_after_a_write > 0  # some cancels hit a fetch whose round trip was sent


async def test_two_fetches_carrying_one_ack_settle_it_once(service: ConsumeService) -> None:
    """Two fetches at once carrying the same ack: one answers acked, the other already_acked;
    one of them leases the one partition, the other finds it held."""
    held = await _fetch(service)
    one, two = PiggybackAcks((_ref(held),)), PiggybackAcks((_ref(held),))
    outcomes = await asyncio.gather(
        service.fetch(FetchQuery("gg", None), acks=one),
        service.fetch(FetchQuery("gg", None), acks=two),
    )
    assert one.results is not None
    assert two.results is not None
    assert sorted(map(str, [*one.results, *two.results])) == ["acked", "already_acked"]
    leased = [o for o in outcomes if o.status == "ok"]
    assert len(leased) == 1
    assert [o.lease for o in outcomes if o.status != "ok"] == [None]
    assert leased[0].messages[0].message_id == held.messages[0].message_id + BATCH_SPAN
    assert await service.settle(_ref(leased[0]), "ack") == "acked"
