"""FaultProxy itself, over a plain echo server: each fault does what it says, on asyncio's loop
and on uvloop (every test runs on both), and no fault or action makes the loop report an error."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tubemq_aio.testing import FaultProxy, LinkFaults

pytestmark = pytest.mark.also_on_uvloop

#: A value other than the default for every fault of :class:`LinkFaults`.
_FAULTY: dict[str, object] = {
    "latency": 9.0,
    "bandwidth": 1,
    "stop_reading": True,
    "blackhole": True,
    "reset_after": 1,
    "corrupt_rate": 1.0,
}


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
    """A proxy in front of an echo server; the test fails if the loop reported any error
    (an exception in the proxy's accept handler or pumps) meanwhile."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with FaultProxy(f"127.0.0.1:{port}", seed=7) as proxy:
            yield proxy
        server.close()
        await server.wait_closed()
        await asyncio.sleep(0.05)  # let handlers that end with the links report
    finally:
        loop.set_exception_handler(None)
    assert reported == []


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
    # each was taken (or failed with a raw AttributeError), the proxy then refused every link
    for target in ("127.0.0.1:0", "127.0.0.1:70000", ":80", 8080):
        with pytest.raises(ValueError, match="host:port"):
            FaultProxy(target)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        FaultProxy("127.0.0.1:1", seed="x")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        FaultProxy("127.0.0.1:1").set(jitter=1)


@pytest.mark.parametrize(
    ("fault", "value"),
    [
        # each was taken: NaN latency or a zero bandwidth meant none, a string latency crashed
        # the proxy's task and reset the link (a network fault the test did not ask for), a
        # NaN corrupt_rate corrupted every chunk
        ("latency", float("nan")),
        ("latency", "0.5"),
        ("latency", -1),
        ("bandwidth", 0),
        ("bandwidth", 0.5),
        ("bandwidth", True),
        ("reset_after", -1),
        ("corrupt_rate", float("nan")),
        ("corrupt_rate", 2),
        ("stop_reading", "no"),
        ("blackhole", 1),
    ],
)
def test_a_bad_fault_value_is_refused_and_nothing_changes(fault: str, value: object) -> None:
    proxy = FaultProxy("127.0.0.1:1")
    with pytest.raises(ValueError, match=f"LinkFaults: {fault} must be"):
        proxy.set("up", **{fault: value})
    assert proxy.faults["up"] == LinkFaults()
    with pytest.raises(ValueError, match=f"LinkFaults: {fault} must be"):
        proxy.faults["down"].__setattr__(fault, value)  # the attributes are live too
    assert proxy.faults["down"] == LinkFaults()


def test_an_unknown_direction_is_refused() -> None:
    """``set("sideways", ...)`` was a KeyError, ``half_close("x")`` did nothing."""
    proxy = FaultProxy("127.0.0.1:1")
    with pytest.raises(ValueError, match="direction must be"):
        proxy.set("sideways", latency=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="direction must be"):
        proxy.half_close("x")  # type: ignore[arg-type]


def test_the_fault_table_covers_every_fault() -> None:
    names = {f.name for f in dataclasses.fields(LinkFaults)} - {"resumed"}
    assert names == set(_FAULTY)


async def test_clear_removes_every_fault_and_new_connections_flow(proxy: FaultProxy) -> None:
    proxy.set("both", **_FAULTY)
    proxy.half_close("down")
    proxy.half_close("up")
    proxy.clear()
    for faults in proxy.faults.values():
        assert dataclasses.replace(faults, resumed=faults.resumed) == LinkFaults()
        assert faults.resumed.is_set()
    assert await _roundtrip(proxy, b"healthy") == b"healthy"


async def test_half_close_leaves_connections_made_later_healthy(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    await asyncio.wait_for(reader.readexactly(1), 5)
    proxy.half_close("down")
    proxy.half_close("up")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    assert await _roundtrip(proxy, b"new link") == b"new link"  # no clear() needed
    writer.close()


async def test_reset_connections_keeps_the_proxy_serving(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    await asyncio.wait_for(reader.readexactly(1), 5)
    proxy.reset_connections()
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.readexactly(1), 5)
    await asyncio.sleep(0.05)  # the accept handler ends the reset link
    assert proxy.open_links == 0
    assert await _roundtrip(proxy, b"after reset") == b"after reset"
    writer.close()


async def test_every_action_is_safe_on_links_already_gone(proxy: FaultProxy) -> None:
    """Each action twice in a row, and on links the peer or a reset already ended."""
    links = [await _connect(proxy) for _ in range(3)]
    for reader, writer in links:
        writer.write(b"a")
        await asyncio.wait_for(reader.readexactly(1), 5)
    links[0][1].transport.abort()  # one client vanished on its own
    proxy.reset_connections()
    proxy.reset_connections()
    proxy.half_close("down")
    proxy.half_close("up")
    proxy.set(reset_after=0)
    proxy.clear()
    await proxy.refuse_connections()
    await proxy.refuse_connections()
    await proxy.start()
    await proxy.start()
    assert await _roundtrip(proxy, b"still fine") == b"still fine"
    for _reader, writer in links:
        writer.close()
    await proxy.close()
    await proxy.close()
