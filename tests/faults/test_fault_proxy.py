"""FaultProxy itself, over a plain echo server: each fault does what it says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tubemq_aio.testing import FaultProxy


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.write_eof()
        await reader.read()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with FaultProxy(f"127.0.0.1:{port}", seed=7) as proxy:
        yield proxy
    server.close()
    await server.wait_closed()


async def _connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = proxy.addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def _roundtrip(proxy: FaultProxy, data: bytes, timeout: float = 5) -> bytes:
    reader, writer = await _connect(proxy)
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.readexactly(len(data)), timeout)
    finally:
        writer.close()


async def test_healthy_proxy_forwards_both_ways(proxy: FaultProxy) -> None:
    assert await _roundtrip(proxy, b"x" * 100_000) == b"x" * 100_000
    assert proxy.forwarded == {"up": 100_000, "down": 100_000}


async def test_latency_holds_data_back(proxy: FaultProxy) -> None:
    proxy.set(latency=0.5)
    reader, writer = await _connect(proxy)
    writer.write(b"ping")
    read = asyncio.ensure_future(reader.readexactly(4))
    done, _ = await asyncio.wait([read], timeout=0.3)
    assert not done  # not there before the latency passed...
    assert await asyncio.wait_for(read, 5) == b"ping"  # ...but it comes
    writer.close()


async def test_bandwidth_cap_paces_a_transfer(proxy: FaultProxy) -> None:
    proxy.set("down", bandwidth=100_000)
    reader, writer = await _connect(proxy)
    writer.write(b"y" * 200_000)  # two seconds' worth at the cap
    await asyncio.sleep(0.3)
    assert proxy.forwarded["down"] < 200_000
    assert len(await asyncio.wait_for(reader.readexactly(200_000), 10)) == 200_000
    writer.close()


async def test_blackhole_swallows_and_clear_heals(proxy: FaultProxy) -> None:
    proxy.set(blackhole=True)
    reader, writer = await _connect(proxy)
    writer.write(b"lost")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.read(1), 0.3)
    proxy.clear()
    writer.write(b"seen")
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"seen"
    writer.close()


async def test_stop_reading_fills_the_senders_buffers(proxy: FaultProxy) -> None:
    proxy.set("up", stop_reading=True)
    _reader, writer = await _connect(proxy)
    writer.write(b"z" * 8_000_000)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(writer.drain(), 0.5)  # the peer does not read: we are stuck
    assert writer.transport.get_write_buffer_size() > 0
    proxy.set("up", stop_reading=False)
    await asyncio.wait_for(writer.drain(), 10)
    writer.transport.abort()


async def test_reset_after_n_bytes(proxy: FaultProxy) -> None:
    proxy.set("down", reset_after=10)
    reader, writer = await _connect(proxy)
    writer.write(b"0123456789abcdef")
    got = await asyncio.wait_for(reader.read(100), 5)
    assert got == b"0123456789"
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.readexactly(1), 5)
    assert proxy.resets == 1
    writer.close()


async def test_corruption_flips_bytes(proxy: FaultProxy) -> None:
    proxy.set("down", corrupt_rate=1.0)
    data = bytes(1000)
    assert await _roundtrip(proxy, data) != data
    assert proxy.corrupted >= 1


async def test_half_close_sends_eof_one_way_only(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    assert await asyncio.wait_for(reader.readexactly(1), 5) == b"a"
    proxy.half_close("down")
    assert await asyncio.wait_for(reader.read(), 5) == b""  # EOF towards the client
    writer.write(b"still sent upstream")
    await asyncio.sleep(0.1)
    assert proxy.forwarded["up"] == 1 + len(b"still sent upstream")
    writer.close()


async def test_refused_connects_and_restart_on_the_same_port(proxy: FaultProxy) -> None:
    addr = proxy.addr
    await proxy.refuse_connections()
    with pytest.raises(ConnectionRefusedError):
        await _connect(proxy)
    await proxy.start()
    assert proxy.addr == addr
    assert await _roundtrip(proxy, b"back") == b"back"


async def test_close_ends_every_link_and_task(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    await asyncio.wait_for(reader.readexactly(1), 5)
    assert proxy.open_links == 1
    await proxy.close()
    assert proxy.open_links == 0
    with pytest.raises(ConnectionResetError):  # closing the proxy resets its links
        await asyncio.wait_for(reader.read(), 5)
    writer.close()


def test_bad_fault_name_and_target_are_refused() -> None:
    with pytest.raises(ValueError, match="host:port"):
        FaultProxy("nowhere")
    with pytest.raises(AttributeError):
        FaultProxy("127.0.0.1:1").set(jitter=1)
