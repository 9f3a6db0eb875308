"""A fetch's GetMessage or CommitOffset that the broker executes late, after the fetch gave up
(``Fault.late``: the fake broker takes the request and runs it when the test says).

Inside the gateway's assumption (a request of a lease is executed before the lease's expiry or
never; ``docs/gateway.md``, "Read-ahead off the critical path") nothing is skipped and nothing is
served twice beyond the batch of a read that gave up, which comes again: the fetch that gave up
leaves its lease to lapse, and the next holder reads from the committed offset. Outside it (the
request runs after the expiry, inside the next holder's read) a batch can be skipped: the last
test shows what happens then, as docs/gateway.md describes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_one_partition import PartitionWorld, one_partition
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.errors import TubeUnavailableError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import Fault, wait_until

GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT
SPEC = GroupSpec(name="glate", topics=("t",), lease_ms_min=100, lease_ms=60_000)
RPC_S = 3.0  # the least rpc_timeout
LEASE_MS = 5000  # the lease of the fetch that gives up: its requests may run until its expiry


@contextlib.asynccontextmanager
async def _one_partition(count: int = 10) -> AsyncIterator[PartitionWorld]:
    async with one_partition(SPEC, count, RPC_S) as world:
        yield world


async def _rest(world: PartitionWorld) -> None:
    while len(world.got) < len(world.bodies):
        await world.take(wait_ms=LEASE_MS + 1000)
    assert world.got == world.bodies  # every message once, in order
    assert not (await world.service.fetch(world.query())).messages  # and nothing more


async def _gives_up(world: PartitionWorld, method: Method) -> float:
    """A fetch whose ``method`` call the broker takes but does not run: it gives up after
    ``rpc_timeout``; returns when the fetch started."""
    world.cluster.inject(method, Fault.late())
    started = time.monotonic()
    with pytest.raises(TubeUnavailableError):
        await world.service.fetch(world.query(LEASE_MS))
    assert world.cluster.held_late(method) == 1
    assert world.service.stats().leases_left_to_lapse == 1
    return started


@pytest.mark.parametrize("method", [GET, COMMIT], ids=["get-message", "commit"])
async def test_a_request_run_late_before_the_lease_expiry_skips_nothing(method: Method) -> None:
    """The request runs while the next fetch waits for the lapsing lease, with more messages
    stored first (a late read takes a larger batch than the one that gave up); the next
    holder's commit is held back a little, so that a read landing inside it would show."""
    async with _one_partition(count=5) as world:
        cluster = world.cluster
        started = await _gives_up(world, method)
        cluster.inject(COMMIT, Fault.late(0.5))
        nxt = asyncio.ensure_future(world.service.fetch(world.query(wait_ms=2 * LEASE_MS)))
        world.bodies += await produce_numbered(cluster.master_addr, "t", 5, start=5)
        assert time.monotonic() < started + LEASE_MS / 1000  # before the expiry
        assert not nxt.done()  # the partition is not handed out meanwhile
        assert cluster.release_late(method) == 1  # runs now, its answer awaited by none
        out = await nxt  # after the expiry, from the committed offset
        assert time.monotonic() >= started + LEASE_MS / 1000 - 0.2
        assert [m.body.decode() for m in out.messages] == world.bodies  # all ten, once
        assert out.lease is not None
        assert await world.service.settle(out.lease.key, "ack") == "acked"
        world.got += world.bodies
        await _rest(world)


async def test_a_get_message_run_late_after_the_fetch_was_cancelled_skips_nothing() -> None:
    async with _one_partition() as world:
        cluster, service = world.cluster, world.service
        cluster.inject(GET, Fault.late())
        fetch = asyncio.ensure_future(service.fetch(world.query(LEASE_MS)))
        await wait_until(lambda: cluster.held_late(GET) == 1, 5, "the GetMessage arrived")
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        assert (await service.fetch(world.query())).status == "busy"  # its answer is waited for
        world.bodies += await produce_numbered(cluster.master_addr, "t", 5, start=10)
        assert cluster.release_late(GET) == 1  # answered on the open connection: released
        await _rest(world)
        assert service.stats().leases_left_to_lapse == 0


async def test_outside_the_assumption_a_read_run_inside_the_next_holders_read_skips() -> None:
    """The GetMessage of a fetch that gave up runs after its lease's expiry, between the next
    holder's GetMessage and the CommitOffset that tells that read's end, with messages stored
    in between: the commit covers the late read's larger batch, and the messages past the
    next holder's batch are skipped (docs/gateway.md: a request run after its deadline is
    outside what the gateway assumes)."""
    async with _one_partition(count=5) as world:
        cluster = world.cluster
        started = await _gives_up(world, GET)
        await asyncio.sleep(max(0.0, started + LEASE_MS / 1000 - time.monotonic()))
        cluster.inject(COMMIT, Fault.late())  # the next holder's commit waits
        fetch = asyncio.ensure_future(world.service.fetch(world.query(wait_ms=LEASE_MS)))
        await wait_until(lambda: cluster.held_late(COMMIT) == 1, 5, "the next holder's commit")
        later = await produce_numbered(cluster.master_addr, "t", 5, start=5)
        assert cluster.release_late(GET) == 1  # the old read: all ten messages in flight
        assert cluster.release_late(COMMIT) == 1  # the next holder's commit covers all ten
        out = await fetch
        assert [m.body.decode() for m in out.messages] == world.bodies  # the first five
        assert cluster.committed_messages(SPEC.name, "t") == 10
        assert out.lease is not None
        assert await world.service.settle(out.lease.key, "ack") == "acked"
        assert not (await world.service.fetch(world.query(wait_ms=500))).messages
        assert later == [f"m{i}" for i in range(5, 10)]  # stored, and never served
