"""The produce micro benchmark (``benchmarks.micro.produce``): ``--read-size`` caps every socket
read of the client's connections, and the run still completes every send."""

from __future__ import annotations

import argparse
import asyncio

import pytest

import tubemq_aio._io.connection
from benchmarks.micro import produce
from tubemq_aio.testing import FakeCluster


async def test_read_size_caps_the_reads_and_every_send_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Restored after the test: the benchmark sets the module's read size for its process.
    monkeypatch.setattr(tubemq_aio._io.connection, "READ_SIZE", tubemq_aio._io.connection.READ_SIZE)
    buffers: list[int] = []
    get_buffer = tubemq_aio._io.connection.Connection.get_buffer

    def recording(self: tubemq_aio._io.connection.Connection, sizehint: int) -> memoryview:
        view = get_buffer(self, sizehint)
        buffers.append(len(view))
        return view

    monkeypatch.setattr(tubemq_aio._io.connection.Connection, "get_buffer", recording)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(produce._StandInBroker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ns = argparse.Namespace(
        topic=produce.TOPIC,
        size=16,
        read_size=44,
        read_coalescing=1 / 32,
        count=64,
        window=4,
        mode="send",
        batch=1,
        uvloop=False,
        master=None,
    )
    try:
        async with FakeCluster(topics={produce.TOPIC: 4}) as cluster:
            cluster.advertise_broker(1, f"127.0.0.1:{port}")
            line = await produce._client(ns, cluster.master_addr)
    finally:
        server.close()
    assert line["read_size"] == 44
    assert line["messages"] == 64
    assert buffers
    assert set(buffers) == {44}
