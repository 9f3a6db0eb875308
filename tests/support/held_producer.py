"""A producer whose broker holds every answer until the test releases it: the stand-in behind
the send-window, send-path and send_many tests (a real broker cannot hold answers on demand)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from tubemq_aio import Producer
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.producer import _batch
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_master_values import HeartbeatResponse, RegisterResponse

__all__ = ["ANSWER", "HeldConnection", "OnePool", "count_spawns", "settle", "started_producer"]

ANSWER = broker_pb.SendMessageResponseB2P(
    success=True, errCode=200, errMsg="OK", messageId=7, appendTime=1, appendOffset=0
).SerializeToString()


class HeldConnection:
    """Answers a send only when the test releases it."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[bytes]] = []

    async def call(self, payload: bytes, timeout: float) -> bytes:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return await fut

    is_closed = False

    def start_parts(
        self, parts: object, size: int, timeout: float
    ) -> tuple[HeldConnection, int, asyncio.Future[bytes]]:
        """The producer's hot path (``Connection.start_parts``): the request is sent at once."""
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        return self, len(self.waiting), fut

    def abandon(self, serial: int) -> None:
        """The caller stopped waiting; its future stays in ``waiting`` (released harmlessly)."""

    def release(self, n: int) -> None:
        """Answer the ``n`` oldest waiting sends."""
        for fut in self.waiting[:n]:
            if not fut.done():
                fut.set_result(ANSWER)
        self.waiting = self.waiting[n:]


class OnePool:
    """A pool with one connection for every address."""

    def __init__(self, conn: HeldConnection) -> None:
        self.conn = conn

    def ready(self, address: object) -> HeldConnection:
        return self.conn


def started_producer(window: int, conn: HeldConnection, **options: Any) -> Producer:
    """A started producer of topic ``t`` (3 partitions) whose only connection is ``conn``."""
    producer = Producer("127.0.0.1:1", max_in_flight_sends=window, **options)
    session = ProducerSession(producer.config, None)  # type: ignore[arg-type]
    session.metadata.apply_register(RegisterResponse(True, 200, "OK", 5, ("1:127.0.0.1:8123",)), 0)
    session.metadata.apply_heartbeat(
        HeartbeatResponse(True, 200, "OK", 5, topic_infos=("t#1:3:1#",)), 0
    )
    session._published["t"] = None
    session._refresh_send_limits()  # as the end of a publish does
    producer._session = session
    producer._rpc = RpcClient(OnePool(conn))  # type: ignore[arg-type]
    producer._build_send_path(producer._rpc, session)
    producer._started = True
    with contextlib.suppress(RuntimeError):  # (a sync test only inspects it)
        producer._loop = asyncio.get_running_loop()  # as start() records it
    return producer


async def settle() -> None:
    """Let the event loop run a few turns."""
    for _ in range(5):
        await asyncio.sleep(0)


def count_spawns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The indexes of the messages ``send_many`` calls hand to a task of their own (the
    single-send code) from now on, in order."""
    spawned: list[int] = []
    spawn = _batch.SendMany._spawn

    def counting_spawn(self: _batch.SendMany, index: int, failure: Any) -> None:
        spawned.append(index)
        spawn(self, index, failure)

    monkeypatch.setattr(_batch.SendMany, "_spawn", counting_spawn)
    return spawned
