"""Master failover: standby and network errors move to the next master, others do not."""

from __future__ import annotations

import pytest

from tests.support.master_scripts import A, B, C, FakeTime, ScriptedRpc, call, timed
from tubemq_aio.errors import (
    BadRequestError,
    ConfigError,
    ConnectError,
    RemoteRpcError,
    RequestTimeoutError,
    StandbyMasterError,
)
from tubemq_aio.master import MasterInvoker
from tubemq_aio.protocol.pb import MasterService_pb2 as pb
from tubemq_aio.protocol.rpc import Method


def standby() -> StandbyMasterError:
    return StandbyMasterError("org.apache.inlong.tubemq.corerpc.exception.StandbyException", "")


async def test_moves_past_standby_and_unreachable_masters_then_stays() -> None:
    rpc = ScriptedRpc({A: standby(), B: ConnectError("refused"), C: None})
    invoker = MasterInvoker(rpc, [A, B, C], timeout=5)
    assert (await call(invoker)).errCode == 200
    assert rpc.calls == [A, B, C]
    assert invoker.current == C
    assert invoker.failovers == 2
    await call(invoker)
    assert rpc.calls[-1] == C


async def test_all_masters_failing_go_round_again_until_the_deadline_then_raise() -> None:
    """Issue 30, fault 1: fast failures (standby, refused) do not end the call in milliseconds."""
    rpc = ScriptedRpc({A: standby(), B: RequestTimeoutError("slow")})
    invoker, time = timed(rpc, [A, B], timeout=5)
    with pytest.raises(RequestTimeoutError):
        await call(invoker)
    assert time.now == pytest.approx(5.0)  # the pauses ended exactly at the deadline
    # A round after every pause but the last (which ended at the deadline itself).
    assert len(rpc.calls) == 2 * len(time.pauses)
    assert len(time.pauses) >= 3
    assert rpc.calls[:4] == [A, B, A, B]
    assert all(0 < p <= 2.0 for p in time.pauses)


async def test_a_master_election_is_waited_out_within_the_deadline() -> None:
    rpc = ScriptedRpc({A: standby(), B: standby()})
    invoker, time = timed(rpc, [A, B], timeout=10)
    elected_after = 3

    async def sleep(seconds: float) -> None:
        await FakeTime.sleep(time, seconds)
        if time.now >= elected_after:
            rpc.script[B] = None

    invoker._sleep = sleep
    assert (await call(invoker)).errCode == 200
    assert elected_after <= time.now < elected_after + 2.0
    assert invoker.current == B


async def test_a_deadline_already_passed_still_makes_one_round() -> None:
    rpc = ScriptedRpc({A: ConnectError("refused"), B: ConnectError("refused")})
    invoker, time = timed(rpc, [A, B], timeout=5)
    body = pb.CloseRequestP2M(clientId="x").SerializeToString()
    with pytest.raises(ConnectError):
        await invoker.call(Method.MASTER_PRODUCER_CLOSE, body, deadline=time.now)
    assert rpc.calls == [A, B]
    assert time.pauses == []


@pytest.mark.parametrize(
    "error", [BadRequestError(400, "bad"), RemoteRpcError("java.lang.Exception", "x")]
)
async def test_errors_another_master_cannot_fix_are_raised_at_once(error: Exception) -> None:
    rpc = ScriptedRpc({A: error, B: None})
    invoker = MasterInvoker(rpc, [A, B], timeout=5)
    with pytest.raises(type(error)):
        await call(invoker)
    assert rpc.calls == [A]


def test_needs_a_master() -> None:
    with pytest.raises(ConfigError):
        MasterInvoker(ScriptedRpc({}), [], timeout=1)
