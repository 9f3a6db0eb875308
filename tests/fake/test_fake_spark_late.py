"""The Spark source's positioned reads and a broker call without answer that the broker
executes late (``Fault.late``; docs/reliability.md, "A request the broker runs late").

A task reads its range with one consumer and gives up on any call without answer (the error
ends the task; Spark runs it again with a new consumer, so a new client id the broker refuses
the old one's late requests for, 412). Within one consumer, a positioned read done again after
a register without answer used to meet that register late: run between the new read's
GetMessage and its commit, it dropped the batch in flight, the commit committed nothing and
answered the batch's own start as the offset after it, and the range reader read the batch
again (every message of it twice in the partition's rows). Now the consumer sends nothing of
the partition for ``rpc_timeout`` after such a call. This runs the source's own reading code
against FakeCluster (no Spark session).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.fake_helpers import produce
from tubemq_aio import ClientBalancedConsumer
from tubemq_aio.errors import RemoteProtocolError, RequestTimeoutError
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.spark._offsets import RECORD, OffsetRange
from tubemq_aio.spark._options import SourceOptions, parse_source_options
from tubemq_aio.spark._planner import consumer_kwargs
from tubemq_aio.spark._reader import read_range
from tubemq_aio.testing import FakeCluster, Fault, wait_until

KEY = "1:demo:0"
SENT, BATCH = 30, 10
RPC_S = 3.0
REGISTER = Method.BROKER_CONSUMER_REGISTER
GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT

pytestmark = pytest.mark.timeout(60)


def _options(cluster: FakeCluster) -> SourceOptions:
    return parse_source_options(
        {"master": cluster.master_addr, "topic": "demo", "startingOffsets": "earliest"},
        streaming=False,
    )


def _consumer(options: SourceOptions) -> ClientBalancedConsumer:
    kwargs: dict[str, Any] = consumer_kwargs(options, options.group, ["demo"])
    kwargs["rpc_timeout"] = RPC_S
    return ClientBalancedConsumer(**kwargs)


async def _rows(consumer: ClientBalancedConsumer, options: SourceOptions) -> list[bytes]:
    bodies: list[bytes] = []
    async for chunk in read_range(consumer, OffsetRange(KEY, 0, SENT * RECORD), options):
        bodies.extend(bytes(b) for b in chunk.columns.bodies.to_pylist())
    return bodies


def _before_commits(cluster: FakeCluster, method: Method) -> None:
    """Run the held ``method`` requests before the broker handles each CommitOffset: between a
    read's GetMessage and its commit."""
    node = cluster.brokers[0].node
    commit: Callable[[RpcRequest], bytes] = node.handlers[int(COMMIT)]

    def handle(request: RpcRequest) -> bytes:
        cluster.release_late(method)
        return commit(request)

    node.handlers[int(COMMIT)] = handle


async def _first_try_times_out(
    consumer: ClientBalancedConsumer, options: SourceOptions, cluster: FakeCluster, method: Method
) -> None:
    """The range's first read meets a held ``method`` request and gives up after RPC_S."""
    cluster.inject(method, Fault.late())
    with pytest.raises(RequestTimeoutError):
        await _rows(consumer, options)
    assert cluster.held_late(method) == 1


async def test_a_task_run_again_reads_its_range_exactly_whenever_the_old_read_runs() -> None:
    """Spark's way: the failed task's consumer is closed and a new one reads the range; the
    old GetMessage runs between the new task's reads and commits (refused: another client)."""
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", SENT)
        options = _options(cluster)
        async with _consumer(options) as first:
            await first.partitions()
            await _first_try_times_out(first, options, cluster, GET)
        _before_commits(cluster, GET)
        async with _consumer(options) as again:
            await again.partitions()
            assert await _rows(again, options) == sent
        assert cluster.held_late() == 0


async def test_a_read_done_again_on_the_same_consumer_meets_no_late_register() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", SENT)
        options = _options(cluster)
        async with _consumer(options) as consumer:
            await consumer.partitions()
            await _first_try_times_out(consumer, options, cluster, REGISTER)
            # the worst moment for it: between the next read's GetMessage and its commit
            _before_commits(cluster, REGISTER)
            registers = cluster.requests(REGISTER)
            reading = asyncio.ensure_future(_rows(consumer, options))
            await asyncio.sleep(RPC_S / 3)
            # nothing of the partition goes to the broker while the register may still run
            assert cluster.requests(REGISTER) == registers
            cluster.release_late(REGISTER)
            assert await reading == sent  # every message of the range once, in order
            await wait_until(lambda: cluster.held_late() == 0, 5, "nothing held")


async def test_a_register_run_later_than_assumed_fails_the_read_instead_of_repeating() -> None:
    """Outside the assumption (the broker runs the register after its rest): it drops the
    batch of the next read before that read's commit, which then commits nothing. The read
    fails (the task runs again) instead of reading the batch a second time."""
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        await produce(cluster.master_addr, "demo", SENT)
        options = _options(cluster)
        async with _consumer(options) as consumer:
            await consumer.partitions()
            await _first_try_times_out(consumer, options, cluster, REGISTER)
            _before_commits(cluster, REGISTER)
            with pytest.raises(RemoteProtocolError, match="committed nothing"):
                await _rows(consumer, options)
