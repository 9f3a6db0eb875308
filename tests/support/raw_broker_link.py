"""A raw consumer connection to a broker (FakeCluster's or a real one): one request out at a
time, its answer (if any) back, so a test controls exactly which connection sends what and
when (the late-request tests, ``tests/fake/test_fake_late_request.py`` and
``tests/integration/test_late_request_cluster.py``)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from tubemq_aio.protocol import consumer_rpc
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, decode_response, encode_request

__all__ = ["Link", "Reader"]


class Link:
    """One raw client connection to a broker."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.serials = itertools.count(1)
        self.frames: list[bytes] = []

    @classmethod
    async def open(cls, addr: str) -> Link:
        """Connect to ``host:port``."""
        host, _, port = addr.rpartition(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    def send(self, method: Method, body: bytes) -> None:
        """Write one request (10 s server-side timeout) without waiting for anything."""
        payload = encode_request(SERVICE_OF_METHOD[method], method, 10_000, body)
        self.writer.write(encode_frame(next(self.serials), payload))

    async def answer(self) -> bytes:
        """The business bytes of the next answer on this connection."""
        while not self.frames:
            self.frames += [f.payload for f in self.decoder.feed(await self.reader.read(65536))]
        data = decode_response(self.frames.pop(0))
        assert isinstance(data, bytes), data
        return data

    async def call(self, method: Method, body: bytes) -> bytes:
        """:meth:`send` then :meth:`answer`."""
        self.send(method, body)
        return await self.answer()

    def abort(self) -> None:
        """Reset the connection (TCP RST)."""
        self.writer.transport.abort()

    def close(self) -> None:
        """Close the connection (FIN)."""
        self.writer.close()


@dataclass(frozen=True)
class Reader:
    """The requests of one consumer client id reading one partition."""

    client_id: str
    group: str
    key: PartitionKey

    def register(self) -> bytes:
        """A register (opType 31) at the group's committed offset."""
        return consumer_rpc.build_broker_register(
            client_id=self.client_id,
            group=self.group,
            key=self.key,
            start=consumer_rpc.RegisterStart(0),
        )

    def unregister(self) -> bytes:
        """An unregister (opType 32) that discards the batch in flight."""
        return consumer_rpc.build_broker_unregister(
            client_id=self.client_id, group=self.group, key=self.key, read_status=1
        )

    def get(self, consumed: bool) -> bytes:
        """A GetMessage, with or without the commit flag."""
        return consumer_rpc.build_get_message(
            client_id=self.client_id,
            group=self.group,
            key=self.key,
            last_pack_consumed=consumed,
            esc_flow_ctrl=False,
        )

    def commit(self) -> bytes:
        """A CommitOffset of the batch in flight."""
        return consumer_rpc.build_commit(
            client_id=self.client_id, group=self.group, key=self.key, consumed=True
        )

    async def registered(self, addr: str) -> Link:
        """A new connection to ``addr`` with the partition registered on it."""
        link = await Link.open(addr)
        rsp = pb.RegisterResponseB2C.FromString(
            await link.call(Method.BROKER_CONSUMER_REGISTER, self.register())
        )
        assert rsp.success, rsp
        return link
