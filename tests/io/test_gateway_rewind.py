"""A broker that came back without its unflushed tail: the read path moves the committed offset
back under its lease (real Redis scripts, a scripted TubeMQ side), older tokens get 409, and the
offsets the broker hands to new messages are delivered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.gateway_redis import flushed_store
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import ConsumeSettings, FetchArgs, GatewayStats
from tubemq_aio.gateway.engine.fetch_attempt import BatchReader
from tubemq_aio.gateway.housekeeper.lag_probe import probe_partition
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import Booking
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.models import Message
from tubemq_aio.supervisor import Supervisor
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

P = "1:t:0"
SPEC = GroupSpec(name="gr", topics=("t",), lease_ms_min=100, lease_ms=60_000)


class ScriptedTube:
    """The TubeMQ side of a read: answers queued by the test, requests remembered."""

    def __init__(self) -> None:
        self.answers: list[TubeRead] = []
        self.asked: list[tuple[int, bool]] = []
        self.registers: list[tuple[int, int]] = []  # (offset, max) a register answers

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        self.asked.append((offset, False))
        return self.registers.pop(0)

    async def read(
        self,
        key: str,
        start: int,
        *,
        cursor_at_start: bool,
        max_messages: int = 1,
        gather_until: float = 0.0,
    ) -> TubeRead:
        self.asked.append((start, cursor_at_start))
        return self.answers.pop(0)


@pytest_asyncio.fixture(loop_scope="module")
async def store(redis_server: RedisServer) -> AsyncIterator[LeaseStore]:
    async with flushed_store(redis_server) as (_, st):
        await st.reset(SPEC.name, "c", "", [(P, 560)])  # boots the group; cmt 560
        yield st


def reader_for(tube: ScriptedTube, stats: GatewayStats) -> BatchReader:
    settings = ConsumeSettings(masters="127.0.0.1:9", redis="redis://x", groups=(SPEC,))

    async def tube_of(_spec: GroupSpec) -> TubeGroup:
        return tube  # type: ignore[return-value]

    return BatchReader(settings, stats, tube_of, Supervisor("test-gateway"))


async def test_a_register_below_committed_rewinds_and_new_messages_flow(
    store: LeaseStore, caplog: pytest.LogCaptureFixture
) -> None:
    # A lease read [560, 616) before the broker crashed; it expires unacked.
    assert (await store.acquire("gr", "c", "A", 100, "h")).status == "leased"
    assert (
        await store.record(LeaseKey("gr", "c", P, "A"), Booking(560, 616, 616, 2, 0, 616))
    ).status == "ok"
    await asyncio.sleep(0.15)
    tube, stats = ScriptedTube(), GatewayStats()
    reader = reader_for(tube, stats)
    # The restarted broker ends at 280: the register at 560 is clamped there (asked twice by
    # TubeGroup.read, so two fresh answers agree), nothing is stored from 280 on yet.
    tube.answers.append(TubeRead("empty", 280, 280, 280, rpcs=4, registered=True))
    with caplog.at_level(logging.WARNING, logger="tubemq_aio.gateway"):
        got = await reader.fetch_once(FetchArgs(SPEC, "c", 60_000, "h"), store)
    assert got.status == "empty"
    assert stats.offset_rewinds == 1
    assert tube.asked == [(560, False)]  # the cursor was not known to be at 560
    assert any(
        "gr" in r.message and P in r.message and "560" in r.message and "280" in r.message
        for r in caplog.records
    )
    state = (await store.dump("gr", "c")).scopes["c"].parts[P]
    assert (state.committed, state.max_offset, state.redeliveries) == (280, 280, 0)
    # The expired lease's late ack is refused (409 lease_stale): the partition was re-leased.
    assert (await store.settle(LeaseKey("gr", "c", P, "A"), "ack")).status == "stale"
    # Messages produced after the restart reuse offsets from 280 on and are delivered.
    await store.client.delete("tgw:{g:gr}:c:ready")
    await store.client.zadd("tgw:{g:gr}:c:ready", {P: 0})  # skip the empty-read rest
    msg = Message(topic="t", body=b"after-restart", partition_key=P)
    tube.answers.append(TubeRead("ok", 280, 336, 336, (msg,), rpcs=2))
    got = await reader.fetch_once(FetchArgs(SPEC, "c", 60_000, "h"), store)
    assert got.status == "ok"
    assert [m.body for m in got.messages] == [b"after-restart"]
    assert tube.asked[-1] == (280, True)  # the empty read left the shared cursor at 280
    assert got.lease is not None
    assert (await store.settle(LeaseKey("gr", "c", P, got.lease.lease_id), "ack")).values == (336,)
    assert stats.offset_rewinds == 1


async def test_no_rewind_without_a_fresh_register(store: LeaseStore) -> None:
    tube, stats = ScriptedTube(), GatewayStats()
    reader = reader_for(tube, stats)
    # A read that claims to end below committed without a register moves nothing back.
    tube.answers.append(TubeRead("ok", 280, 280, 280, rpcs=2))
    got = await reader.fetch_once(FetchArgs(SPEC, "c", 60_000, "h"), store)
    assert got.status == "empty"
    assert stats.offset_rewinds == 0
    assert (await store.dump("gr", "c")).scopes["c"].parts[P].committed == 560


@pytest.mark.parametrize(("second", "moved"), [((280, 280), True), ((560, 700), False)])
async def test_the_housekeeper_probe_rewinds_an_idle_partition_on_two_agreeing_registers(
    store: LeaseStore, second: tuple[int, int], moved: bool
) -> None:
    tube = ScriptedTube()
    tube.registers += [(280, 280), second]
    rewinds: list[int] = []
    got = await probe_partition(
        store,
        tube,  # type: ignore[arg-type]
        FetchArgs(SPEC, "c", 10_000, "hk"),
        P,
        on_rewind=lambda: rewinds.append(1),
    )
    assert got
    assert tube.asked == [(560, False), (560, False)]
    state = await store.dump("gr", "c")
    assert state.scopes["c"].parts[P].committed == (280 if moved else 560)
    assert state.scopes["c"].parts[P].lease_id is None  # the probe's lease was released
    assert rewinds == ([1] if moved else [])
