"""FetchEngine's wait after a broker call that may still arrive (docs/reliability.md, "A
request the broker runs late"), against a scripted broker whose ``timeout`` is short: a
GetMessage or CommitOffset that timed out, or whose connection broke after the write, keeps its
partition unread for ``timeout``; one the broker refused, or that was never sent, does not.
The end-to-end skip this prevents is in ``tests/fake/test_fake_consumer_late_request.py``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest

from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import (
    ConnectionLostError,
    RequestNotSentError,
    RequestTimeoutError,
    ServerError,
)
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.partitions import PartitionLeases

BROKER = BrokerInfo(1, "127.0.0.1", 8123)
WAIT_S = 1.0  # the scripted broker's call timeout: the wait after a call without answer


class _Broker:
    """GetMessage and CommitOffset answered from scripts of errors (then a batch, and OK);
    records when each call was made (loop time) and with which flag."""

    def __init__(self) -> None:
        self.timeout = WAIT_S
        self.rpc = SimpleNamespace(retry_in=lambda _peer: 0.0)
        self.get_errors: list[BaseException] = []
        self.commit_errors: list[BaseException] = []
        self.fetches: list[tuple[float, bool]] = []
        self.commits: list[float] = []

    async def get_message(
        self, partition: Partition, *, last_pack_consumed: bool, esc_flow_ctrl: bool
    ) -> GetMessageResponse:
        self.fetches.append((asyncio.get_running_loop().time(), last_pack_consumed))
        await asyncio.sleep(0)
        if self.get_errors:
            raise self.get_errors.pop(0)
        body = b"m"
        message = RawMessage(len(self.fetches), checksum(body), body, 0)
        return GetMessageResponse(True, 200, "OK", (message,), 0, 280, 0, 0, False, False)

    async def commit(self, partition: Partition, *, consumed: bool) -> OffsetResponse:
        self.commits.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0)
        if self.commit_errors:
            raise self.commit_errors.pop(0)
        return OffsetResponse(True, 200, "OK", 28, 280)


async def _engine(broker: _Broker) -> tuple[FetchEngine, asyncio.Task[None]]:
    config = ConsumerConfig(masters="127.0.0.1:8715", group="g1", topics=["t"], fetchers=1)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    leases = PartitionLeases()
    leases.add(Partition(BROKER, "t", 0), loop.time())
    engine = FetchEngine(
        config, leases, cast(BrokerRpc, broker), FlowControlState(), ConsumerStats(), loop.time
    )
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
    broker = _Broker()
    broker.get_errors.append(error)
    engine, task = await _engine(broker)
    batch = await engine.get(None, 5)
    assert len(batch) == 1
    (failed, _), (read, flag) = broker.fetches
    assert (read - failed >= WAIT_S) is waits
    assert not flag  # read again from the committed offset
    assert engine.stats.late_request_waits == int(waits)
    await _stop(engine, task)


async def test_a_timed_out_commit_waits_and_its_ack_rides_on_the_next_fetch() -> None:
    broker = _Broker()
    broker.commit_errors.append(RequestTimeoutError("no answer"))
    engine, task = await _engine(broker)
    first = await engine.get(None, 5)
    assert await first.ack()
    second = await engine.get(None, 5)
    assert len(second) == 1
    (committed,) = broker.commits
    (_, _), (read, flag) = broker.fetches
    assert read - committed >= WAIT_S
    assert flag  # the ack the failed commit carried
    assert engine.stats.late_request_waits == 1
    await _stop(engine, task)
