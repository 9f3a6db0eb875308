"""FetchEngine's wait after a broker call that may still arrive (docs/reliability.md, "A
request the broker runs late"), through a real ``BrokerRpc`` (the one record of such calls,
``BrokerRpc.astray``) over a scripted transport whose ``timeout`` is short: a GetMessage or
CommitOffset that timed out, or whose connection broke after the write, keeps its partition
unread for ``timeout``; one the broker refused, or that was never sent, does not. The end-to-end
skip this prevents is in ``tests/fake/test_fake_consumer_late_request.py``."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import cast

import pytest

from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.auth import TokenState
from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._session_base import _count_late_request
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import (
    ConnectionLostError,
    RequestNotSentError,
    RequestTimeoutError,
    ServerError,
)
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.partitions import PartitionLeases
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method

BROKER = BrokerInfo(1, "127.0.0.1", 8123)
WAIT_S = 1.0  # the consumer's call timeout: the wait after a call without answer


class _Transport:
    """Broker GetMessage and CommitOffset calls answered from scripts of errors (then one
    message, and OK); records when each call was sent (loop time) and GetMessage's partition
    and flag."""

    def __init__(self) -> None:
        self.get_errors: list[BaseException] = []
        self.commit_errors: list[BaseException] = []
        self.fetches: list[tuple[float, int, bool]] = []
        self.commits: list[float] = []

    def retry_in(self, peer: BrokerInfo) -> float:
        return 0.0

    async def call(
        self, peer: BrokerInfo, method: Method, body: bytes, timeout: float, *, raw: bool = False
    ) -> bytes:
        sent = asyncio.get_running_loop().time()
        await asyncio.sleep(0)
        if method is Method.BROKER_CONSUMER_GET_MESSAGE:
            request = pb.GetMessageRequestC2B.FromString(body)
            self.fetches.append((sent, request.partitionId, request.lastPackConsumed))
            if self.get_errors:
                raise self.get_errors.pop(0)
            payload = b"m"
            message = pb.TransferedMessage(
                messageId=len(self.fetches), checkSum=checksum(payload), payLoadData=payload, flag=0
            )
            return pb.GetMessageResponseB2C(
                success=True, errCode=200, errMsg="OK", messages=[message], maxOffset=280
            ).SerializeToString()
        assert method is Method.BROKER_CONSUMER_COMMIT
        self.commits.append(sent)
        if self.commit_errors:
            raise self.commit_errors.pop(0)
        return pb.CommitOffsetResponseB2C(
            success=True, errCode=200, errMsg="OK", currOffset=28, maxOffset=280
        ).SerializeToString()


async def _engine(
    transport: _Transport, partitions: int = 1, prefetch: int = 4
) -> tuple[FetchEngine, asyncio.Task[None]]:
    config = ConsumerConfig(
        masters="127.0.0.1:8715",  # type: ignore[arg-type]
        group="g1",
        topics=["t"],  # type: ignore[arg-type]
        fetchers=1,
        max_prefetch_batches=prefetch,
    )
    loop = asyncio.get_running_loop()
    leases = PartitionLeases()
    for i in range(partitions):
        leases.add(Partition(BROKER, "t", i), loop.time())
    flow, stats = FlowControlState(), ConsumerStats()
    broker = BrokerRpc(
        cast(RpcClient, transport),
        client_id="c1",
        group="g1",
        tokens=TokenState(),
        flow=flow,
        timeout=WAIT_S,
        astray=AstrayCalls(WAIT_S, on_late=partial(_count_late_request, stats), clock=loop.time),
    )
    engine = FetchEngine(config, leases, broker, flow, stats, loop.time)
    return engine, loop.create_task(engine.run())


async def _stop(engine: FetchEngine, task: asyncio.Task[None]) -> None:
    engine.close()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize(
    ("error", "waits"),
    [
        (RequestTimeoutError("no answer"), True),
        (ConnectionLostError("lost after the write"), True),
        (ServerError(500, "refused"), False),
        (RequestNotSentError("lost before the write"), False),
    ],
    ids=["timeout", "lost-after-the-write", "refused", "not-sent"],
)
async def test_a_failed_fetch_waits_only_when_its_request_may_still_arrive(
    error: BaseException, waits: bool
) -> None:
    transport = _Transport()
    transport.get_errors.append(error)
    engine, task = await _engine(transport)
    batch = await engine.get(None, 5)
    assert len(batch) == 1
    (failed, _, _), (read, _, flag) = transport.fetches
    assert (read - failed >= WAIT_S) is waits
    assert not flag  # read again from the committed offset
    assert engine.stats.late_request_waits == int(waits)
    await _stop(engine, task)


async def test_a_timed_out_commit_waits_and_its_ack_rides_on_the_next_fetch() -> None:
    transport = _Transport()
    transport.commit_errors.append(RequestTimeoutError("no answer"))
    engine, task = await _engine(transport)
    first = await engine.get(None, 5)
    assert await first.ack()
    second = await engine.get(None, 5)
    assert len(second) == 1
    (committed,) = transport.commits
    (_, _, _), (read, _, flag) = transport.fetches
    assert read - committed >= WAIT_S
    assert flag  # the ack the failed commit carried
    assert engine.stats.late_request_waits == 1
    await _stop(engine, task)


async def test_a_resting_partition_holds_no_fetcher() -> None:
    """The engine asks ``BrokerRpc.astray`` before a read and rests the lease: after a commit
    without answer the one fetcher reads the other partition meanwhile, instead of waiting
    inside the resting partition's GetMessage."""
    transport = _Transport()
    transport.commit_errors.append(RequestTimeoutError("no answer"))
    engine, task = await _engine(transport, partitions=2, prefetch=1)
    first = await engine.get(None, 5)
    assert await first.ack()  # its commit gets no answer: the partition rests
    (committed,) = transport.commits
    second = await engine.get(None, 5)  # the other one; the fetcher turns to the resting one
    assert await second.ack()
    third = await engine.get(None, 5)
    assert third.partition_key == second.partition_key != first.partition_key
    sent, _, _ = transport.fetches[-1]
    assert sent - committed < WAIT_S  # read while the first partition rests
    assert engine.stats.late_request_waits == 1
    await _stop(engine, task)
