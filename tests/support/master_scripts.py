"""Master calls scripted per address, for the tests of :class:`~tubemq_aio.master.MasterInvoker`
(which master answers, after how long): three addresses, an RPC stand-in that raises or answers as
told, and a clock that moves only when the invoker sleeps."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tubemq_aio.config import HostPort
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.master import MasterInvoker
from tubemq_aio.protocol.pb import MasterService_pb2 as pb
from tubemq_aio.protocol.rpc import Method

A, B, C = HostPort("a", 1), HostPort("b", 2), HostPort("c", 3)
#: Seconds a silent address's timeout error comes after the timeout it was given.
TRANSPORT_LAG = 0.02


@dataclass(frozen=True)
class Late:
    """An address that answers only after ``after`` seconds of the event loop (None: never; the
    attempt then ends as a real one does, with a timeout just after the seconds it was given)."""

    after: float | None = None


class ScriptedRpc:
    """Answers each address with a scripted exception or a response (``None``), or late."""

    def __init__(self, script: dict[HostPort, Exception | Late | None]) -> None:
        self.script = script
        self.calls: list[HostPort] = []
        self.timeouts: list[float] = []  # the timeout each attempt was given

    async def call(self, addr: HostPort, method: Method, body: bytes, timeout: float) -> bytes:
        self.calls.append(addr)
        self.timeouts.append(timeout)
        outcome = self.script[addr]
        if isinstance(outcome, Late):
            if outcome.after is None or outcome.after >= timeout:
                # A real transport's timer starts once it connected: it ends a moment late.
                await asyncio.sleep(timeout + TRANSPORT_LAG)
                raise RequestTimeoutError(f"no response from {addr} within {timeout} s")
            await asyncio.sleep(outcome.after)
        elif outcome is not None:
            raise outcome
        return pb.CloseResponseM2P(success=True, errCode=200, errMsg="OK").SerializeToString()


async def call(invoker: MasterInvoker) -> pb.CloseResponseM2P:
    body = pb.CloseRequestP2M(clientId="x").SerializeToString()
    return pb.CloseResponseM2P.FromString(await invoker.call(Method.MASTER_PRODUCER_CLOSE, body))


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
