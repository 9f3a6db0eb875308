"""The hot path of ``await Producer.send``: a plain send's first attempt runs in ``send``'s own
frame over the RPC client's open connection to the broker; whatever goes wrong is booked as
before. (How the RPC client finds that connection is tested in ``tests/io/test_io_rpc_conns.py``.)

The connections are stand-ins whose answers, losses and refusals the test decides (a broker
cannot lose a link or refuse on demand); everything above them is the real producer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tests.support.held_producer import ANSWER, settle, started_producer
from tubemq_aio import Producer, SendResult
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.errors import (
    ConnectionLostError,
    RequestNotSentError,
    SendOutcomeUnknownError,
    ServerError,
)
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb


def refusal(code: int) -> bytes:
    return broker_pb.SendMessageResponseB2P(
        success=False, errCode=code, errMsg="no", messageId=0, appendTime=0, appendOffset=0
    ).SerializeToString()


class Link:
    """A connection whose requests wait until the test answers them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.waiting: list[asyncio.Future[bytes]] = []
        self.abandoned: list[int] = []
        self.closed = False
        self.full = False  # no room right now: start_parts says "use call"
        self.calls = 0  # requests sent through the slow path (``call``)

    @property
    def is_closed(self) -> bool:
        return self.closed

    def start_parts(
        self, parts: Sequence[bytes], size: int, timeout: float
    ) -> tuple[Link, int, asyncio.Future[bytes]] | None:
        if self.closed or self.full:
            return None
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return self, len(self.waiting), fut

    async def call(self, payload: bytes, timeout: float, *, raw: bool = False) -> bytes:
        self.calls += 1
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return await fut

    def abandon(self, serial: int) -> None:
        self.abandoned.append(serial)

    def answer(self, payload: bytes = ANSWER) -> None:
        self.waiting.pop(0).set_result(payload)

    def fail(self, exc: Exception) -> None:
        self.waiting.pop(0).set_exception(exc)


class SwitchPool:
    """Hands out whichever link is current (``None``: no open connection)."""

    def __init__(self, link: Link | None) -> None:
        self.link = link

    def ready(self, address: object) -> Link | None:
        return self.link if self.link is not None and not self.link.closed else None

    async def connection(self, address: object) -> Link:
        assert self.link is not None
        return self.link


def producer_on(link: Link | None, **options: object) -> tuple[Producer, SwitchPool]:
    producer = started_producer(16, link, **options)  # type: ignore[arg-type]
    pool = SwitchPool(link)
    producer._rpc = RpcClient(pool)  # type: ignore[arg-type]
    assert producer._session is not None
    producer._build_send_path(producer._rpc, producer._session)
    return producer, pool


def counters(producer: Producer) -> tuple[int, int, int, int, int]:
    return producer.sent, producer.failed, producer.cancelled, producer.retried, producer.in_flight


async def sending(producer: Producer, body: bytes = b"x") -> asyncio.Task[SendResult]:
    """Start ``producer.send`` in a task and let it reach its first await."""
    task = asyncio.ensure_future(producer.send("t", body))
    await settle()
    return task


async def test_a_plain_send_is_answered_and_counted() -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    assert producer.in_flight == 1
    link.answer()
    result = await asyncio.wait_for(task, 5)
    assert result.message_id == 7
    assert counters(producer) == (1, 0, 0, 0, 0)


async def test_cancelled_while_awaiting_the_answer_abandons_the_request() -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert link.abandoned == [1]
    assert counters(producer) == (0, 0, 1, 0, 0)


async def test_cancelled_on_the_slow_path_is_counted_once() -> None:
    link = Link("a")
    link.full = True
    producer, _ = producer_on(link)
    task = await sending(producer)
    assert link.calls == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert counters(producer) == (0, 0, 1, 0, 0)


async def test_no_room_on_the_connection_uses_the_waiting_call() -> None:
    link = Link("a")
    link.full = True
    producer, _ = producer_on(link)
    task = await sending(producer)
    assert link.calls == 1
    link.answer()
    assert (await asyncio.wait_for(task, 5)).message_id == 7
    assert counters(producer) == (1, 0, 0, 0, 0)


async def test_a_connection_lost_mid_send_is_outcome_unknown() -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    link.fail(ConnectionLostError("reset"))
    with pytest.raises(SendOutcomeUnknownError):
        await asyncio.wait_for(task, 5)
    assert counters(producer) == (0, 1, 0, 0, 0)


@pytest.mark.parametrize("failure", ["503", "419", "not-sent"])
async def test_a_retriable_first_attempt_is_retried(failure: str) -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    if failure == "not-sent":
        link.fail(RequestNotSentError("lost before writing"))
    else:
        link.answer(refusal(int(failure)))
    await settle()
    assert len(link.waiting) == 1  # the retry went out
    link.answer()
    assert (await asyncio.wait_for(task, 5)).message_id == 7
    assert counters(producer) == (1, 0, 0, 1, 0)


async def test_refusals_are_retried_until_the_deadline_then_the_last_one_is_raised() -> None:
    """Issue 30, fault 1: the retries are bounded by the send's deadline, not by ``send_retries``
    (which only says how many go out without a pause)."""
    link = Link("a")
    producer, _ = producer_on(link, send_retries=1)
    loop = asyncio.get_running_loop()
    began = loop.time()
    task = asyncio.ensure_future(producer.send("t", b"x", timeout=0.5))
    refused = 0
    while not task.done():
        await asyncio.sleep(0.005)
        while link.waiting:
            link.answer(refusal(503))
            refused += 1
    with pytest.raises(ServerError) as info:
        await task
    assert info.value.err_code == 503
    assert 0.45 <= loop.time() - began <= 1.0
    assert refused >= 4  # retried past send_retries, paced by the policy's pauses
    assert counters(producer) == (0, 1, 0, refused - 1, 0)


async def test_cancelled_during_the_retry_is_counted_once() -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    link.answer(refusal(503))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert counters(producer) == (0, 0, 1, 1, 0)


async def test_a_final_refusal_fails_at_once() -> None:
    link = Link("a")
    producer, _ = producer_on(link)
    task = await sending(producer)
    link.answer(refusal(400))
    with pytest.raises(ServerError):
        await asyncio.wait_for(task, 5)
    assert counters(producer) == (0, 1, 0, 0, 0)


async def test_sends_after_the_connection_closed_use_the_new_one() -> None:
    old = Link("old")
    producer, pool = producer_on(old)
    task = await sending(producer)
    old.answer()
    await asyncio.wait_for(task, 5)
    old.closed = True
    new = pool.link = Link("new")
    for _ in range(2):
        task = await sending(producer, b"y")
        assert not old.waiting
        assert len(new.waiting) == 1
        new.answer()
        await asyncio.wait_for(task, 5)
    assert counters(producer) == (3, 0, 0, 0, 0)


async def test_a_new_connection_without_room_takes_the_waiting_call() -> None:
    link = Link("a")
    producer, pool = producer_on(link)
    task = await sending(producer)
    link.answer()
    await asyncio.wait_for(task, 5)
    pool.link = None  # no open connection at the pool: the slow path connects
    link.closed = True
    fresh = Link("fresh")
    fresh.full = True
    pool.link = fresh
    task = await sending(producer, b"y")
    assert fresh.calls == 1
    fresh.answer()
    await asyncio.wait_for(task, 5)
    assert counters(producer) == (2, 0, 0, 0, 0)
