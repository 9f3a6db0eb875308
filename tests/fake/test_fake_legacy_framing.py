"""framing="legacy-length" (TubeMQ servers 1.1.0 and 1.2.0, docs/protocol/wire.md §1.7): the
bytes a connection writes, the answers it reads, and every client against a FakeCluster that
speaks that framing; a mismatch in either direction fails with a hint naming the other one."""

from __future__ import annotations

import asyncio
import struct
import subprocess

import pytest

from tests.support.cli_run import CALL_TIMEOUT, cli_argv, cli_env
from tests.support.echo_server import MemoryTransport, request_payload
from tests.support.fake_helpers import HEARTBEAT, drain
from tubemq_aio import ClientBalancedConsumer, Consumer, Producer
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import (
    ConfigError,
    ConnectionLostError,
    FrameError,
    LocalProtocolError,
    RequestTimeoutError,
    SourceOptionError,
)
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.protocol.framing import BLOCK_SIZE, encode_frame
from tubemq_aio.protocol.legacy_framing import Framing
from tubemq_aio.protocol.rpc import encode_success
from tubemq_aio.spark._options import client_options
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(60)

LEGACY = TransportSettings(framing="legacy-length")


async def written(transport: MemoryTransport) -> None:
    """Let the connection flush this tick's frames."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert transport.written


@pytest.mark.parametrize("size", [1, BLOCK_SIZE - 40, BLOCK_SIZE + 1, 3 * BLOCK_SIZE])
async def test_each_request_leaves_behind_its_length(size: int) -> None:
    conn = Connection("memory", LEGACY)
    transport = MemoryTransport()
    conn.connection_made(transport)
    payload = request_payload(b"b" * size)
    call = asyncio.ensure_future(conn.call(payload, 5.0))
    await written(transport)
    frame = encode_frame(1, payload)
    assert bytes(transport.written) == struct.pack(">I", len(frame)) + frame
    answer = encode_frame(1, encode_success(1, b"ok"))
    conn.data_received(struct.pack(">I", len(answer)) + answer)
    assert await call == b"ok"
    conn.abort()


async def test_a_bare_answer_breaks_a_legacy_connection() -> None:
    conn = Connection("memory", LEGACY)
    transport = MemoryTransport()
    conn.connection_made(transport)
    call = asyncio.ensure_future(conn.call(request_payload(b"x"), 5.0))
    await written(transport)
    conn.data_received(encode_frame(1, encode_success(1, b"ok")))
    with pytest.raises(FrameError, match="framing='standard'"):
        await call
    assert conn.is_closed


async def test_a_request_over_five_mib_is_refused_before_it_is_sent() -> None:
    conn = Connection("memory", TransportSettings(framing="legacy-length"))
    transport = MemoryTransport()
    conn.connection_made(transport)
    with pytest.raises(LocalProtocolError, match="5242880"):
        await conn.call(request_payload(b"z" * (5 * 1024 * 1024)), 5.0)
    assert not transport.written
    conn.abort()


@pytest.mark.parametrize("legacy", [True, False])
async def test_an_unanswered_drop_hints_at_the_other_framing(legacy: bool) -> None:
    settings = LEGACY if legacy else TransportSettings()
    conn = Connection("memory", settings)
    transport = MemoryTransport()
    conn.connection_made(transport)
    call = asyncio.ensure_future(conn.call(request_payload(b"x"), 5.0))
    await written(transport)
    conn.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    hint = "'standard'" if legacy else "framing='legacy-length'"
    with pytest.raises(ConnectionLostError, match=hint):
        await call


async def test_no_hint_once_the_server_has_answered() -> None:
    conn = Connection("memory", TransportSettings())
    transport = MemoryTransport()
    conn.connection_made(transport)
    first = asyncio.ensure_future(conn.call(request_payload(b"x"), 5.0))
    await written(transport)
    conn.data_received(encode_frame(1, encode_success(1, b"ok")))
    await first
    second = asyncio.ensure_future(conn.call(request_payload(b"y"), 5.0))
    await asyncio.sleep(0)
    conn.connection_lost(None)
    with pytest.raises(ConnectionLostError) as caught:
        await second
    assert "framing" not in str(caught.value)


def test_framing_is_checked_and_read_from_a_url() -> None:
    with pytest.raises(ConfigError, match="framing must be one of"):
        Producer("127.0.0.1:8715", framing="lengthy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="framing must be one of"):
        TransportSettings(framing=None)  # type: ignore[arg-type]
    producer = Producer.from_url("tubemq://127.0.0.1:8715?framing=legacy-length")
    assert producer.config.framing == "legacy-length"
    with pytest.raises(ValueError, match="framing"):
        FakeCluster(framing="old")  # type: ignore[arg-type]


async def test_every_client_works_against_a_legacy_cluster() -> None:
    async with FakeCluster(topics={"demo": 2}, framing="legacy-length") as cluster:
        big = b"B" * (2 * BLOCK_SIZE + 5)  # a frame of several blocks each way
        bodies = [b"small", big, *(f"m{i}".encode() for i in range(20))]
        async with Producer(cluster.master_addr, framing="legacy-length") as producer:
            for body in bodies:
                await producer.send("demo", body)
        group = Consumer(
            cluster.master_addr,
            group="g1",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=HEARTBEAT,
            framing="legacy-length",
        )
        async with group:
            assert sorted(await drain(group, len(bodies), timeout=20)) == sorted(bodies)
        balanced = ClientBalancedConsumer(
            cluster.master_addr,
            group="cb1",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=HEARTBEAT,
            framing="legacy-length",
        )
        async with balanced:
            for meta in await balanced.partitions():
                await balanced.connect(meta.partition_key)
            assert sorted(await drain(balanced, len(bodies), timeout=20)) == sorted(bodies)


#: What a client of the other framing meets, as on the real servers (1.2.0-incubating and 2.4.0):
#: silence on a connection that stays open, so a timeout that names the other framing.
MISMATCH: dict[str, tuple[type[Exception], str]] = {
    "legacy-length": (RequestTimeoutError, "connect with framing='legacy-length'"),
    "standard": (RequestTimeoutError, "need 'standard'"),
}


@pytest.mark.parametrize("server", ["legacy-length", "standard"])
async def test_a_framing_mismatch_fails_with_the_hint(server: Framing) -> None:
    client: Framing = "standard" if server == "legacy-length" else "legacy-length"
    error, hint = MISMATCH[server]
    async with FakeCluster(topics={"demo": 1}, framing=server) as cluster:
        producer = Producer(cluster.master_addr, framing=client, rpc_timeout=3)
        with pytest.raises(error, match=hint):
            await asyncio.wait_for(producer.start(), 60)
        await producer.close()


@pytest.mark.parametrize("server", ["legacy-length", "standard"])
async def test_a_fake_swallows_the_other_framing_and_all_after_it(server: Framing) -> None:
    async with FakeCluster(topics={"demo": 1}, framing=server) as cluster:
        host, port = cluster.master_addr.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        good = encode_frame(1, request_payload(b"x"))
        writer.write(good + struct.pack(">I", len(good)) + good)  # bare, then a proper unit
        await writer.drain()
        with pytest.raises(TimeoutError):  # no answer, and no close (read would return b"")
            await asyncio.wait_for(reader.read(1), 1.0)
        writer.close()
        await writer.wait_closed()


@pytest.mark.system  # the CLI as a process
async def test_the_cli_reaches_a_legacy_cluster_through_the_url() -> None:
    async with FakeCluster(topics={"demo": 1}, framing="legacy-length") as cluster:
        url = f"tubemq://{cluster.master_addr}?framing=legacy-length"
        done = await asyncio.to_thread(
            subprocess.run,
            cli_argv("produce", "--master", url, "--topic", "demo", "-q"),
            input=b"one\ntwo\n",
            capture_output=True,
            env=cli_env(),
            timeout=CALL_TIMEOUT,
        )
        assert done.returncode == 0, done.stderr
        assert cluster.message_count("demo") == 2


def test_spark_and_gateway_options_carry_the_framing() -> None:
    options = {"master": "127.0.0.1:8715", "framing": "legacy-length"}
    assert client_options(options)["framing"] == "legacy-length"
    assert "framing" not in client_options({"master": "127.0.0.1:8715"})
    with pytest.raises(SourceOptionError, match="framing"):
        client_options({"master": "127.0.0.1:8715", "framing": "old"})
    access = TubeMQAccess.from_mapping({"framing": "legacy-length"})
    assert access.client_options() == {"framing": "legacy-length"}
    with pytest.raises(ConfigError, match=r"tubemq\.framing"):
        TubeMQAccess.from_mapping({"framing": 1})


async def test_the_gateway_group_session_reads_a_legacy_cluster() -> None:
    async with FakeCluster(topics={"demo": 1}, framing="legacy-length") as cluster:
        access = TubeMQAccess(framing="legacy-length").client_options()
        tube = TubeGroup(
            TubeReach(cluster.master_addr, "d", client_options=access),
            group="gw-g",
            topics=["demo"],
        )
        try:
            await tube.start()
            assert await tube.partitions(force=True) == ["1:demo:0"]
        finally:
            await tube.close()
