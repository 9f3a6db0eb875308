"""A master call is bounded as a whole: a silent master (it accepted the connection and never
answers) no longer costs a full ``timeout`` per address in the first round.

Found by listing three masters that all stopped answering: a metadata query or a heartbeat took
``3 × rpc_timeout`` (9 s at ``rpc_timeout=3``), and a silent first master used up the call
before a healthy second one was asked. The loop-time bounds below leave generous slack; what they
separate is one ``timeout`` from several.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.master_scripts import A, B, C, Late, ScriptedRpc, call
from tubemq_aio.errors import RequestTimeoutError, StandbyMasterError
from tubemq_aio.master import MASTER_STAGGER, MasterInvoker
from tubemq_aio.protocol.rpc import Method


class TaskRecording(ScriptedRpc):
    """Passes each call to ``rpc`` and records, in ``started``, the task each attempt runs in."""

    def __init__(self, rpc: ScriptedRpc, started: list[asyncio.Task[object]]) -> None:
        super().__init__({})
        self.rpc = rpc
        self.started = started

    async def call(self, *args: object, **kwargs: object) -> bytes:
        task = asyncio.current_task()
        assert task is not None
        self.started.append(task)
        return await self.rpc.call(*args, **kwargs)  # type: ignore[arg-type]


def standby() -> StandbyMasterError:
    return StandbyMasterError("org.apache.inlong.tubemq.corerpc.exception.StandbyException", "")


def loop_time() -> float:
    return asyncio.get_running_loop().time()


async def test_three_silent_masters_end_the_call_by_its_timeout() -> None:
    rpc = ScriptedRpc({A: Late(), B: Late(), C: Late()})
    invoker = MasterInvoker(rpc, [A, B, C], timeout=0.9)
    began = loop_time()
    with pytest.raises(RequestTimeoutError) as caught:
        await call(invoker)
    elapsed = loop_time() - began
    assert rpc.calls == [A, B, C]  # every address asked, each once
    assert all(t <= 0.9 for t in rpc.timeouts)
    assert rpc.timeouts[0] > rpc.timeouts[1] > rpc.timeouts[2]  # each ends by the call's end
    assert elapsed < 0.9 + 0.6  # before: 3 × 0.9 s
    assert "3 addresses" in str(caught.value)


async def test_a_silent_first_master_does_not_use_up_the_call() -> None:
    rpc = ScriptedRpc({A: Late(), B: None})
    invoker = MasterInvoker(rpc, [A, B], timeout=3.0)
    began = loop_time()
    assert (await call(invoker)).errCode == 200
    assert rpc.calls == [A, B]
    assert invoker.current == B  # the next call goes to the master that answered
    assert invoker.failovers == 1
    assert loop_time() - began < MASTER_STAGGER + 1.5  # before: the whole 3 s, then B


async def test_a_late_answer_of_an_earlier_master_still_wins() -> None:
    """The master asked first is slow, not dead: the standbys asked meanwhile answer at once,
    and its answer, when it comes, ends the call."""
    rpc = ScriptedRpc({A: Late(after=MASTER_STAGGER + 0.3), B: standby(), C: standby()})
    invoker = MasterInvoker(rpc, [A, B, C], timeout=5.0)
    assert (await call(invoker)).errCode == 200
    assert rpc.calls == [A, B, C]
    assert invoker.current == A
    assert invoker.failovers == 2


async def test_an_answer_cancels_the_attempts_still_silent() -> None:
    started: list[asyncio.Task[object]] = []
    rpc = ScriptedRpc({A: Late(), B: Late(), C: None})

    invoker = MasterInvoker(TaskRecording(rpc, started), [A, B, C], timeout=0.9)
    assert (await call(invoker)).errCode == 200
    assert rpc.calls == [A, B, C]
    assert [t.done() for t in started] == [True, True, True]
    assert [t.cancelled() for t in started] == [True, True, False]


async def test_a_call_cancelled_by_its_caller_ends_every_attempt_it_started() -> None:
    """Two tasks on one invoker, one cancelled while its staggered attempts wait on silent
    masters: its attempts end with it (no task left running), the other call is not touched."""
    started: list[asyncio.Task[object]] = []
    rpc = ScriptedRpc({A: Late(), B: Late(), C: Late()})

    invoker = MasterInvoker(TaskRecording(rpc, started), [A, B, C], timeout=3.0)
    cut, other = asyncio.ensure_future(call(invoker)), asyncio.ensure_future(call(invoker))
    await asyncio.sleep(MASTER_STAGGER + 0.2)  # each call has asked A, then B
    assert len(started) == 4
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    assert cut.cancelled()
    ended = [t for t in started if t.done()]
    assert len(ended) == 2  # the cut call's two
    assert all(t.cancelled() for t in ended)
    assert not other.done()
    other.cancel()
    with pytest.raises(asyncio.CancelledError):
        await other
    assert all(t.cancelled() for t in started)


async def test_a_call_without_time_left_raises_a_timeout_without_asking() -> None:
    """A close given nothing of its budget any more (the release used it up) asks no master."""
    rpc = ScriptedRpc({A: None})
    invoker = MasterInvoker(rpc, [A], timeout=5.0)
    body = b""
    with pytest.raises(RequestTimeoutError, match="before any master was asked"):
        await invoker.call(Method.MASTER_CONSUMER_CLOSE, body, timeout=0.0, deadline=0.0)
    assert rpc.calls == []


async def test_the_transports_own_timeout_error_is_kept() -> None:
    """The transport's timeout, due when the call's time is up, ends the attempt with its own
    error (which may say why: the hint of a framing mismatch), not the round's abandoning it."""
    rpc = ScriptedRpc({A: Late(), B: Late()})
    invoker = MasterInvoker(rpc, [A, B], timeout=0.6)
    with pytest.raises(RequestTimeoutError) as caught:
        await call(invoker)
    assert str(caught.value).count("no response from") == 2
    assert "did not answer in time" not in str(caught.value)
