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


async def test_all_masters_failing_raises_last_error() -> None:
    rpc = ScriptedRpc({A: standby(), B: RequestTimeoutError("slow")})
    invoker = MasterInvoker(rpc, [A, B], timeout=5)
    with pytest.raises(RequestTimeoutError):
        await call(invoker)
    assert rpc.calls == [A, B]


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
