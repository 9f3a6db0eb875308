"""Master failover: standby and network errors move to the next master, others do not."""

from __future__ import annotations

import pytest

from tubemq_aio.config import HostPort
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

A, B, C = HostPort("a", 1), HostPort("b", 2), HostPort("c", 3)


class ScriptedRpc:
    """Answers each address with a scripted exception or a response."""

    def __init__(self, script: dict[HostPort, Exception | None]) -> None:
        self.script = script
        self.calls: list[HostPort] = []

    async def call(self, addr: HostPort, method: Method, body: bytes, timeout: float) -> bytes:
        self.calls.append(addr)
        outcome = self.script[addr]
        if outcome is not None:
            raise outcome
        return pb.CloseResponseM2P(success=True, errCode=200, errMsg="OK").SerializeToString()


def standby() -> StandbyMasterError:
    return StandbyMasterError("org.apache.inlong.tubemq.corerpc.exception.StandbyException", "")


async def call(invoker: MasterInvoker) -> pb.CloseResponseM2P:
    body = pb.CloseRequestP2M(clientId="x").SerializeToString()
    return pb.CloseResponseM2P.FromString(await invoker.call(Method.MASTER_PRODUCER_CLOSE, body))


async def test_moves_past_standby_and_unreachable_masters_then_stays() -> None:
    rpc = ScriptedRpc({A: standby(), B: ConnectError("refused"), C: None})
    invoker = MasterInvoker(rpc, [A, B, C], timeout=5)
    assert (await call(invoker)).errCode == 200
    assert rpc.calls == [A, B, C]
    assert invoker.current == C
    assert invoker.failovers == 2
    await call(invoker)
    assert rpc.calls[-1] == C


class FakeTime:
    """A clock that only moves when the invoker sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def timed(
    rpc: ScriptedRpc, masters: list[HostPort], timeout: float
) -> tuple[MasterInvoker, FakeTime]:
    time = FakeTime()
    invoker = MasterInvoker(
        rpc, masters, timeout, clock=time.clock, sleep=time.sleep, rand=lambda: 0.5
    )
    return invoker, time


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
