"""Whether a fetch attempt's broker call may still reach the broker (:class:`BrokerCall`), and
an early commit whose end leaves it on its way failing the read (:func:`settle_early`): a lease
is given back only when every request of its holder was answered or never sent
(``docs/gateway.md``, "Read-ahead off the critical path")."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio.errors import (
    ConnectError,
    ConnectionLostError,
    PartitionOccupiedError,
    RemoteRpcError,
    RequestNotSentError,
    RequestTimeoutError,
)
from tubemq_aio.gateway.tubemq.broker_call import BrokerCall
from tubemq_aio.gateway.tubemq.early_commit import settle_early
from tubemq_aio.protocol.consumer_replies import OffsetResponse


async def _fails(error: BaseException) -> int:
    await asyncio.sleep(0)
    raise error


async def _answers(delay: float = 0.0) -> int:
    await asyncio.sleep(delay)
    return 7


async def _caller_cancelled(answer_after: float) -> BrokerCall:
    """A call answered ``answer_after`` seconds after it was sent, its caller cancelled."""
    call = BrokerCall()
    caller = asyncio.ensure_future(call.run(_answers(answer_after)))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    return call


async def test_no_call_and_an_answered_call_are_not_astray() -> None:
    call = BrokerCall()
    assert not call.astray
    assert await call.run(_answers()) == 7
    assert (call.astray, call.pending) == (False, False)


@pytest.mark.parametrize(
    "error",
    [
        PartitionOccupiedError(410, "held"),
        RemoteRpcError("java.lang.Exception", "boom"),
        RequestNotSentError("not sent"),
        ConnectError("refused"),
    ],
)
async def test_a_call_answered_by_a_refusal_or_never_sent_is_not_astray(
    error: BaseException,
) -> None:
    call = BrokerCall()
    with pytest.raises(type(error)):
        await call.run(_fails(error))
    assert not call.astray


@pytest.mark.parametrize(
    "error", [RequestTimeoutError("late"), ConnectionLostError("lost"), OSError("reset")]
)
async def test_a_call_that_ended_without_an_answer_is_astray(error: BaseException) -> None:
    call = BrokerCall()
    with pytest.raises(type(error)):
        await call.run(_fails(error))
    assert call.astray
    with pytest.raises(RequestNotSentError):  # astray stays until the attempt ends
        await call.run(_fails(RequestNotSentError("x")))
    assert not call.astray  # ... unless a later call of it is answered: one call at a time


async def test_a_cancelled_caller_leaves_the_call_running_until_it_is_answered() -> None:
    call = await _caller_cancelled(0.05)
    assert (call.pending, call.astray) == (True, True)
    with pytest.raises(RuntimeError):  # one call at a time
        await call.run(_answers())
    assert await call.wait(asyncio.get_running_loop().time() + 10.0)
    assert (call.pending, call.astray) == (False, False)


async def test_a_call_not_answered_by_the_deadline_is_cancelled_and_astray() -> None:
    call = await _caller_cancelled(10.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert not await call.wait(started + 0.05)
    assert loop.time() - started < 5.0
    assert (call.pending, call.astray) == (False, True)


async def test_a_cancelled_wait_cancels_the_call() -> None:
    call = await _caller_cancelled(10.0)
    waiter = asyncio.ensure_future(call.wait(asyncio.get_running_loop().time() + 10.0))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)
    assert (call.pending, call.astray) == (False, True)


async def _commit_fails(error: BaseException) -> OffsetResponse:
    raise error


async def test_an_early_commit_refused_or_never_sent_is_ignored() -> None:
    await settle_early(_commit_fails(PartitionOccupiedError(410, "held")))
    await settle_early(_commit_fails(RequestNotSentError("not sent")))
    await settle_early(None)


@pytest.mark.parametrize("error", [RequestTimeoutError("late"), ConnectionLostError("lost")])
async def test_an_early_commit_that_may_still_arrive_fails_the_read(error: BaseException) -> None:
    with pytest.raises(type(error)):
        await settle_early(_commit_fails(error))
