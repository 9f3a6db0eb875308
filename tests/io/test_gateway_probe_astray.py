"""A lag probe whose register may still reach the broker leaves its lease to lapse (real Redis
scripts, a scripted TubeMQ side): a register sent and not answered (a timeout, the probe
cancelled) can land inside the next fetch's read, so nobody may read the partition before the
probe's lease ends; a register the broker refused, or one never sent, gives the lease back at
once (``docs/gateway.md``, "Read-ahead off the critical path")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.gateway_redis import flushed_store
from tubemq_aio.errors import (
    ConnectionLostError,
    PartitionOccupiedError,
    RequestNotSentError,
    RequestTimeoutError,
)
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import FetchArgs
from tubemq_aio.gateway.housekeeper.lag_probe import probe_partition
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.testing import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

P = "1:t:0"
SPEC = GroupSpec(name="gp", topics=("t",), lease_ms_min=100, lease_ms=60_000)
LEASE_MS = 400


class FailingTube:
    """The TubeMQ side of a probe: every register ends with ``error`` (None: it never
    answers)."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error
        self.sent = asyncio.Event()

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        self.sent.set()
        if self.error is None:
            await asyncio.Event().wait()
        assert self.error is not None
        raise self.error


@pytest_asyncio.fixture(loop_scope="module")
async def store(redis_server: RedisServer) -> AsyncIterator[LeaseStore]:
    async with flushed_store(redis_server) as (_, st):
        await st.reset(SPEC.name, "c", "", [(P, 560)])  # boots the group; cmt 560
        yield st


async def _probe(store: LeaseStore, tube: FailingTube) -> None:
    await probe_partition(store, tube, FetchArgs(SPEC, "c", LEASE_MS, "hk"), P)  # type: ignore[arg-type]


async def _lease_of_p(store: LeaseStore) -> tuple[str | None, int | None]:
    state = (await store.dump(SPEC.name, "c")).scopes["c"]
    return state.parts[P].lease_id, state.leased.get(P)


@pytest.mark.parametrize(
    "error", [RequestTimeoutError("no answer"), ConnectionLostError("lost"), None]
)
async def test_a_register_that_may_still_arrive_leaves_the_lease_to_lapse(
    store: LeaseStore, error: BaseException | None
) -> None:
    tube = FailingTube(error)
    if error is None:  # the probe is cancelled while its register is on its way
        task = asyncio.create_task(_probe(store, tube))
        await tube.sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(type(error)):
            await _probe(store, tube)
    lid, lexp = await _lease_of_p(store)
    assert lid is not None  # not released
    assert lexp is not None
    got = await store.acquire(SPEC.name, "c", "F", 60_000, "fetch")
    assert got.status == "none"
    assert got.next_ready_and_expiry == (-1, lexp)  # the fetch learns when the lease ends
    # a reset meanwhile holds the partition until then too
    await store.reset(SPEC.name, "c", "", [(P, 560)])
    got = await store.acquire(SPEC.name, "c", "F", 60_000, "fetch")
    assert (got.status, got.next_ready_and_expiry[0]) == ("none", lexp)
    await asyncio.sleep(max(0.0, (lexp - got.now) / 1000) + 0.01)
    got = await store.acquire(SPEC.name, "c", "F", 60_000, "fetch")
    assert got.leased().partition_key == P
    assert got.leased().cursor is None  # where the broker's cursor is is unknown: registers
    released = await store.settle(LeaseKey(SPEC.name, "c", P, "F"), "release", 0)
    assert released.status == "released"


@pytest.mark.parametrize(
    "error", [PartitionOccupiedError(410, "held"), RequestNotSentError("not sent")]
)
async def test_a_register_refused_or_never_sent_gives_the_lease_back(
    store: LeaseStore, error: BaseException
) -> None:
    with pytest.raises(type(error)):
        await _probe(store, FailingTube(error))
    assert (await _lease_of_p(store))[0] is None
    got = await store.acquire(SPEC.name, "c", "F", 60_000, "fetch")
    assert got.leased().partition_key == P
    released = await store.settle(LeaseKey(SPEC.name, "c", P, "F"), "release", 0)
    assert released.status == "released"
