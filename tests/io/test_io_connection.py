"""One connection against the fake server: pipelining, timeouts, cancellation, failures.

The tests marked ``also_on_uvloop`` run on uvloop too (its transports are not
``asyncio.Transport``; see ``tests/io/conftest.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.echo_server import (
    FakeServer,
    MemoryTransport,
    limit_send_buffer,
    request_payload,
)
from tests.support.self_signed import self_signed_cert
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.decisions import MAX_SERIAL
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import (
    ClientClosedError,
    ConnectionLostError,
    FrameError,
    RemoteProtocolError,
    RemoteRpcError,
    RequestNotSentError,
    RequestTimeoutError,
    ServiceStoppingError,
    StandbyMasterError,
)
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import encode_exception, encode_success, success_bounds

pytestmark = pytest.mark.timeout(30)


def addr(server: FakeServer) -> Address:
    return Address("127.0.0.1", server.port)


@pytest.mark.also_on_uvloop
async def test_10k_pipelined_calls_with_random_response_order(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.shuffle = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    bodies = [f"body-{i}".encode() for i in range(10_000)]
    results = await asyncio.gather(*(conn.call(request_payload(b), 10.0) for b in bodies))
    assert results == bodies
    assert pool.stats.requests_sent == 10_000
    assert pool.stats.responses == 10_000
    assert pool.stats.dropped_responses == 0
    assert conn.in_flight == 0
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_timeout_fails_call_and_keeps_connection(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    # The loop's own clock, which schedules the deadline (time.monotonic() once saw uvloop fire
    # at 0.0996 s: its clock keeps whole milliseconds, hence also the 1 ms allowance below).
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(RequestTimeoutError, match="may or may not have been processed"):
        await conn.call(request_payload(b"x"), 0.1)
    elapsed = loop.time() - start
    # Not before the deadline; the upper bound only catches a hang (the machine may be loaded).
    assert 0.099 <= elapsed < 10.0
    assert isinstance(RequestTimeoutError("t"), TimeoutError)
    assert pool.stats.timeouts == 1
    assert conn.in_flight == 0
    assert not conn.is_closed
    server.knobs.drop = False
    assert await conn.call(request_payload(b"y"), 5.0) == b"y"
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_cancel_mid_flight_drops_late_reply(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.delay = 0.2
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    task = asyncio.create_task(conn.call(request_payload(b"first"), 5.0))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.in_flight == 0
    assert pool.stats.cancelled == 1
    # A later call must get its own reply, never the cancelled call's late one.
    assert await conn.call(request_payload(b"second"), 5.0) == b"second"
    assert pool.stats.dropped_responses == 1
    assert not conn.is_closed
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_server_close_mid_flight_fails_all_pending_fast(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.delay = 10.0
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 30.0)) for i in range(20)]
    await asyncio.sleep(0.05)
    assert conn.in_flight == 20
    start = time.monotonic()
    await server.stop()
    results = await asyncio.gather(*calls, return_exceptions=True)
    # Far sooner than the 10 s server delay and the 30 s call timeout: failed by the loss.
    assert time.monotonic() - start < 8.0
    assert all(isinstance(r, ConnectionLostError) for r in results)
    assert "may or may not have been processed" in str(results[0])
    assert conn.is_closed
    assert pool.connections == {}
    with pytest.raises(RequestNotSentError, match="lost before the request was written"):
        await conn.call(request_payload(b"late"), 1.0)
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_in_flight_bound_makes_callers_wait(server: FakeServer) -> None:
    server.knobs.delay = 0.4
    settings = TransportSettings(sweep_interval=0.01, max_in_flight=3)
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 5.0)) for i in range(5)]
    await asyncio.sleep(0.1)
    assert conn.in_flight == 3
    assert len(server.requests) == 3
    assert await asyncio.gather(*calls) == [b"0", b"1", b"2", b"3", b"4"]
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_pause_writing_blocks_senders(server: FakeServer) -> None:
    server.knobs.pause_reading = True
    settings = TransportSettings(
        sweep_interval=0.01, write_high_water=64 * 1024, write_low_water=16 * 1024
    )
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    limit_send_buffer(conn)
    chunk = request_payload(b"z" * 65536)
    flood = [asyncio.create_task(conn.call(chunk, 10.0)) for _ in range(64)]
    for _ in range(200):
        await asyncio.sleep(0.01)
        if conn.writing_paused:
            break
    assert conn.writing_paused
    caller = asyncio.create_task(conn.call(request_payload(b"small"), 10.0))
    await asyncio.sleep(0.05)
    assert not caller.done()
    assert conn.waiting >= 1  # the caller, behind the flood's calls past the high-water mark
    server.resume_reading()
    assert len(await asyncio.gather(*flood)) == 64
    assert await caller == b"small"
    assert not conn.writing_paused
    assert conn.waiting == 0
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_garbage_from_server_closes_connection(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    waiting = asyncio.create_task(conn.call(request_payload(b"w"), 5.0))
    await asyncio.sleep(0.02)
    server.knobs.drop = False
    server.knobs.garbage = b"\x00" * 16
    with pytest.raises(FrameError):
        await conn.call(request_payload(b"g"), 5.0)
    with pytest.raises(FrameError):
        await waiting
    assert conn.is_closed
    await pool.close()


@pytest.mark.parametrize(
    ("answer", "token", "named"),
    [
        # a web port (a master's web API, an HTTP gateway): was only "bad frame begin token"
        (
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            "0x48545450",
            "answered in HTTP",
        ),
        # another text protocol's port (Redis here; an SSH server, SMTP), found by an
        # adversarial review: the error quotes the peer's first line
        (b"-ERR unknown command '\\xff\\x7f'\r\n", "0x2D455252", 'answered "-ERR unknown command'),
    ],
    ids=["http", "text-banner"],
)
async def test_a_foreign_answer_names_the_wrong_port(
    settings: TransportSettings, answer: bytes, token: str, named: str
) -> None:
    """A client pointed at another service's port was told only "bad frame begin token ...";
    the error now says what the peer speaks and that it is not a TubeMQ client port."""

    async def foreign(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(answer)
        await writer.drain()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(foreign, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool(settings)
    try:
        conn = await pool.connection(Address("127.0.0.1", port))
        with pytest.raises(FrameError, match=f"bad frame begin token {token}") as info:
            await conn.call(request_payload(b"x"), 5.0)
        assert f"127.0.0.1:{port} {named}" in str(info.value)
        assert "not a TubeMQ client port" in str(info.value)
    finally:
        await pool.close()
        server.close()
        await server.wait_closed()


async def test_a_tls_port_reached_without_tls_is_named(
    settings: TransportSettings, tmp_path: Path
) -> None:
    """A client without TLS at a TLS port (a master's tlsPort) saw the link closed and was
    told only to try framing='legacy-length'; the hint now names TLS too."""
    cert, key = self_signed_cert(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)

    async def closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await reader.read(1)
        writer.close()

    server = await asyncio.start_server(closes, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool(settings)
    try:
        conn = await pool.connection(Address("127.0.0.1", port))
        with pytest.raises(ConnectionLostError) as info:
            await conn.call(request_payload(b"x"), 5.0)
        assert "framing='legacy-length'" in str(info.value)
        assert "if this is a TLS port" in str(info.value)
    finally:
        await pool.close()
        server.close()
        await server.wait_closed()


async def test_undecodable_envelope_closes_connection(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.handler = lambda request: b"\x05\x01"
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    with pytest.raises(RemoteProtocolError):
        await conn.call(request_payload(b"x"), 5.0)
    assert conn.is_closed
    await pool.close()


async def test_io_exception_frame_closes_connection_after_its_call(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    server.knobs.exception = (
        "org.apache.inlong.tubemq.corerpc.exception.ServiceStoppingException",
        "service is stopping",
        False,
    )
    with pytest.raises(ServiceStoppingError):
        await conn.call(request_payload(b"x"), 5.0)
    assert not conn.is_closed  # not an IOException on the Java side
    server.knobs.exception = (
        "org.apache.inlong.tubemq.corerpc.exception.StandbyException",
        "not master now",
        False,
    )
    with pytest.raises(StandbyMasterError) as info:
        await conn.call(request_payload(b"x"), 5.0)
    assert isinstance(info.value, RemoteRpcError)
    await asyncio.sleep(0.01)
    assert conn.is_closed
    assert pool.connections == {}
    await pool.close()


async def test_duplicate_responses_are_dropped_and_counted(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.duplicate = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    bodies = [b"%d" % i for i in range(10)]
    assert await asyncio.gather(*(conn.call(request_payload(b), 5.0) for b in bodies)) == bodies
    assert await conn.call(request_payload(b"last"), 5.0) == b"last"
    await asyncio.sleep(0.05)
    assert pool.stats.dropped_responses == 11
    assert not conn.is_closed
    await pool.close()


async def test_serial_numbers_wrap_within_31_bits(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    conn._serial = MAX_SERIAL - 1
    assert await conn.call(request_payload(b"a"), 5.0) == b"a"
    assert conn._serial == MAX_SERIAL
    assert await conn.call(request_payload(b"b"), 5.0) == b"b"
    assert conn._serial == 1
    await pool.close()


@pytest.mark.also_on_uvloop
async def test_close_fails_pending_with_client_closed(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 30.0)) for i in range(5)]
    await asyncio.sleep(0.02)
    assert "in_flight=5" in repr(conn)
    await pool.close()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in results)
    assert "closed=True" in repr(conn)
    with pytest.raises(ClientClosedError):
        await conn.call(request_payload(b"x"), 1.0)


async def test_frames_of_one_tick_leave_in_one_write(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    transport = conn._transport
    assert transport is not None
    batches: list[int] = []
    original = transport.write

    def spy(data: Any) -> None:
        batches.append(len(FrameDecoder().feed(bytes(data))))  # whole frames only
        original(data)

    transport.write = spy  # type: ignore[method-assign]
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 5.0)) for i in range(100)]
    await asyncio.gather(*calls)
    assert batches == [100]
    await asyncio.gather(*(conn.call(request_payload(b"%d" % i), 5.0) for i in range(2)))
    assert batches == [100, 2]
    await pool.close()


async def test_tcp_nodelay_is_on(server: FakeServer, settings: TransportSettings) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    assert conn._transport is not None
    sock = conn._transport.get_extra_info("socket")
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    await pool.close()


async def test_no_timer_or_task_per_request(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    loop = asyncio.get_running_loop()
    tasks_before = len(asyncio.all_tasks())
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 30.0)) for i in range(500)]
    await asyncio.sleep(0.02)
    assert conn.in_flight == 500
    assert len(asyncio.all_tasks()) == tasks_before + 500  # the callers' own tasks, no more
    # Only the sweeper's and the reaper's sleeps are scheduled, not one timer per request.
    assert len(loop._scheduled) <= 2  # type: ignore[attr-defined]
    await pool.close()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ClientClosedError) for r in results)


async def test_server_aborting_on_a_request_fails_all_in_flight(
    server: FakeServer, settings: TransportSettings
) -> None:
    server.knobs.delay = 10.0
    server.knobs.close_after = 5
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    calls = [asyncio.create_task(conn.call(request_payload(b"%d" % i), 30.0)) for i in range(5)]
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10.0)
    assert all(isinstance(r, ConnectionLostError) for r in results), results
    assert pool.stats.connections_closed == 1
    await pool.close()


async def test_start_sends_at_once_and_abandon_frees_the_slot(
    server: FakeServer, settings: TransportSettings
) -> None:
    pool = ConnectionPool(settings)
    conn = await pool.connection(addr(server))
    started = conn.start(request_payload(b"a"), 5.0)
    assert started is not None
    assert started[0] is conn
    _, _, fut = started
    assert await asyncio.wait_for(fut, 5.0) == b"a"
    server.knobs.drop = True
    started = conn.start(request_payload(b"b"), 5.0)
    assert started is not None
    _, serial, fut = started
    assert conn.in_flight == 1
    conn.abandon(serial)
    conn.abandon(serial)  # a second call is harmless
    assert conn.in_flight == 0
    assert pool.stats.cancelled == 1
    await conn.close()
    assert conn.start(request_payload(b"c"), 5.0) is None  # closed: nothing is sent
    await pool.close()


async def test_start_returns_none_when_every_slot_is_busy(server: FakeServer) -> None:
    server.knobs.drop = True
    pool = ConnectionPool(TransportSettings(max_in_flight=1))
    conn = await pool.connection(addr(server))
    assert conn.start(request_payload(b"a"), 5.0) is not None
    assert conn.start(request_payload(b"b"), 5.0) is None
    assert pool.stats.requests_sent == 1
    await pool.close()


async def test_raw_calls_get_success_answers_whole_and_errors_as_usual() -> None:
    conn = Connection("memory", TransportSettings())
    conn.connection_made(MemoryTransport())

    def answer(serial: int, payload: bytes) -> None:
        conn.data_received(encode_frame(serial, payload))

    big = bytes(range(256)) * 600  # multi-byte envelope lengths
    plain = asyncio.ensure_future(conn.call(request_payload(b"a"), 5.0))
    whole = asyncio.ensure_future(conn.call(request_payload(b"b"), 5.0, raw=True))
    failed = asyncio.ensure_future(conn.call(request_payload(b"c"), 5.0, raw=True))
    other = asyncio.ensure_future(conn.call(request_payload(b"d"), 5.0, raw=True))
    await asyncio.sleep(0)
    answer(1, encode_success(17, big))
    answer(2, encode_success(17, big))
    answer(3, encode_exception("java.lang.IllegalStateException", "no"))
    # SUCCESS with the body's fields in another order: decoded, then re-wrapped plainly.
    odd = b"\x02\x08\x01\x04\x08\x00\x18\x03" + bytes([7]) + b"\x12\x03xyz\x08\x11"
    assert success_bounds(odd) is None
    answer(4, odd)
    assert await plain == big
    got = await whole
    start, end = success_bounds(got) or (0, 0)
    assert got[start:end] == big
    assert got == encode_success(17, big)
    with pytest.raises(RemoteRpcError, match="no"):
        await failed
    got = await other
    start, end = success_bounds(got) or (0, 0)
    assert got[start:end] == b"xyz"
    assert conn._raw == set()
    # A raw call that times out, is cancelled or is failed by close leaves no serial behind.
    late = asyncio.ensure_future(conn.call(request_payload(b"e"), 0.01, raw=True))
    cancelled = asyncio.ensure_future(conn.call(request_payload(b"f"), 5.0, raw=True))
    await asyncio.sleep(0)
    assert conn._raw == {5, 6}
    cancelled.cancel()
    await asyncio.sleep(0.05)
    conn.expire(asyncio.get_running_loop().time())
    with pytest.raises(RequestTimeoutError):
        await late
    assert conn._raw == set()
    pending = asyncio.ensure_future(conn.call(request_payload(b"g"), 5.0, raw=True))
    await asyncio.sleep(0)
    assert conn._raw == {7}
    conn.abort()
    with pytest.raises(ClientClosedError):
        await pending
    assert conn._raw == set()


async def test_requests_lost_before_their_write_are_not_sent_and_written_ones_unknown(
    settings: TransportSettings,
) -> None:
    """Issue 30, fault 1: a link lost between a request's registration and the tick's write fails
    that request as never written (safe to retry), while a request already written before the
    loss is "may or may not have been processed"."""
    conn = Connection("mem:1", settings)
    transport = MemoryTransport()
    conn.connection_made(transport)
    written = conn.start(request_payload(b"w"), 5.0)
    assert written is not None
    await asyncio.sleep(0)  # the tick's write
    assert transport.writes == 1
    queued = [conn.start(request_payload(b"%d" % i), 5.0) for i in range(3)]
    conn.connection_lost(ConnectionResetError(104, "reset"))  # before the next tick's write
    with pytest.raises(ConnectionLostError) as lost:
        await written[2]
    assert not isinstance(lost.value, RequestNotSentError)
    for started in queued:
        assert started is not None
        with pytest.raises(RequestNotSentError):
            await started[2]


async def test_a_write_the_socket_refuses_leaves_its_requests_not_sent(
    settings: TransportSettings,
) -> None:
    """The transport closes itself when the socket refuses a write: those requests were not
    written either."""

    class Refusing(MemoryTransport):
        def write(self, data: Any) -> None:
            self.closing = True  # asyncio's transport on a send() error: closing, nothing sent

    conn = Connection("mem:1", settings)
    conn.connection_made(Refusing())
    started = conn.start(request_payload(b"x"), 5.0)
    assert started is not None
    await asyncio.sleep(0)
    conn.connection_lost(ConnectionResetError(104, "reset"))
    with pytest.raises(RequestNotSentError):
        await started[2]


async def test_unwritten_requests_are_told_apart_across_the_serial_wrap(
    settings: TransportSettings,
) -> None:
    conn = Connection("mem:1", settings)
    transport = MemoryTransport()
    conn.connection_made(transport)
    conn._serial = MAX_SERIAL - 1
    written = conn.start(request_payload(b"w"), 5.0)  # serial MAX_SERIAL
    await asyncio.sleep(0)
    queued = conn.start(request_payload(b"q"), 5.0)  # serial 1, after the wrap
    assert written is not None
    assert queued is not None
    assert (written[1], queued[1]) == (MAX_SERIAL, 1)
    conn.connection_lost(None)
    with pytest.raises(ConnectionLostError) as lost:
        await written[2]
    assert not isinstance(lost.value, RequestNotSentError)
    with pytest.raises(RequestNotSentError):
        await queued[2]
