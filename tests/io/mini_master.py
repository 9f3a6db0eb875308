"""A loopback master (and producer-side broker) just big enough for client life-cycle tests.

It answers register, heartbeat and close of producers, server-balanced and client-balanced
consumers, and producer sends, on one :class:`~echo_server.FakeServer` (the master and the
broker share the port). Methods listed in ``silent`` are never answered, so
a test can stop a client in the middle of a call (``silent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from echo_server import FakeServer, Knobs

from tubemq_aio.protocol._pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol._pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.rpc import Method, RpcRequest, encode_success

__all__ = ["MiniMaster", "mini_master_fixture"]

TOPIC = "t"


class MiniMaster:
    """Answers the calls of the clients under test; counts them by method."""

    def __init__(self) -> None:
        self.server = FakeServer(Knobs(handler=self._answer))
        self.calls: dict[Method, int] = {}
        #: Methods whose requests are swallowed (never answered) while listed.
        self.silent: set[Method] = set()
        #: Methods answered with ``success=False, errCode=400`` while listed.
        self.refuse: set[Method] = set()

    @property
    def address(self) -> str:
        """``127.0.0.1:port`` of the master (and broker)."""
        return f"127.0.0.1:{self.server.port}"

    def count(self, method: Method) -> int:
        """How many requests of ``method`` arrived."""
        return self.calls.get(method, 0)

    def _answer(self, request: RpcRequest) -> bytes | None:
        method = Method(request.method)
        self.calls[method] = self.calls.get(method, 0) + 1
        if method in self.silent:
            return None
        body = self._body(method)
        if method in self.refuse:
            body = _refused(method, body)
        return encode_success(method, body)

    def _body(self, method: Method) -> bytes:
        port = self.server.port
        if method is Method.MASTER_PRODUCER_REGISTER:
            return master_pb.RegisterResponseM2P(
                success=True,
                errCode=200,
                errMsg="OK",
                brokerCheckSum=1,
                brokerInfos=[f"1:127.0.0.1:{port}"],
            ).SerializeToString()
        if method is Method.MASTER_PRODUCER_HEARTBEAT:
            return master_pb.HeartResponseM2P(
                success=True,
                errCode=200,
                errMsg="OK",
                brokerCheckSum=1,
                topicInfos=[f"{TOPIC}#1:3:1#"],
                brokerInfos=[f"1:127.0.0.1:{port}"],
            ).SerializeToString()
        if method is Method.MASTER_PRODUCER_CLOSE:
            return master_pb.CloseResponseM2P(
                success=True, errCode=200, errMsg="OK"
            ).SerializeToString()
        if method is Method.BROKER_PRODUCER_SEND_MESSAGE:
            return broker_pb.SendMessageResponseB2P(
                success=True, errCode=200, errMsg="OK", messageId=7, appendTime=1, appendOffset=0
            ).SerializeToString()
        if method is Method.MASTER_CONSUMER_REGISTER:
            return master_pb.RegisterResponseM2C(
                success=True, errCode=200, errMsg="OK"
            ).SerializeToString()
        if method is Method.MASTER_CONSUMER_HEARTBEAT:
            return master_pb.HeartResponseM2C(
                success=True, errCode=200, errMsg="OK"
            ).SerializeToString()
        if method is Method.MASTER_CONSUMER_CLOSE:
            return master_pb.CloseResponseM2C(
                success=True, errCode=200, errMsg="OK"
            ).SerializeToString()
        if method is Method.MASTER_CONSUMER_REGISTER_V2:
            return master_pb.RegisterResponseM2CV2(errCode=200, errMsg="OK").SerializeToString()
        if method is Method.MASTER_CONSUMER_HEARTBEAT_V2:
            return master_pb.HeartResponseM2CV2(errCode=200, errMsg="OK").SerializeToString()
        raise AssertionError(f"mini master has no answer for {method!r}")


def _refused(method: Method, body: bytes) -> bytes:
    message = _RESPONSES[method].FromString(body)
    if hasattr(message, "success"):
        message.success = False
    message.errCode = 400
    message.errMsg = "refused by the test"
    return bytes(message.SerializeToString())


_RESPONSES: dict[Method, Any] = {
    Method.MASTER_PRODUCER_REGISTER: master_pb.RegisterResponseM2P,
    Method.MASTER_CONSUMER_REGISTER: master_pb.RegisterResponseM2C,
    Method.MASTER_CONSUMER_REGISTER_V2: master_pb.RegisterResponseM2CV2,
}


@pytest.fixture(name="master")
async def mini_master_fixture() -> AsyncIterator[MiniMaster]:
    """A started :class:`MiniMaster`, stopped after the test."""
    master = MiniMaster()
    await master.server.start()
    yield master
    await master.server.stop()
    await asyncio.sleep(0)
