"""The echo ``FakeServer`` restarted on its old port keeps that port while it is stopped.

Between ``stop()`` and ``start()`` the port was free, so the kernel could give it to another
socket of the machine asking for a free one (another test's server, in a parallel run) and the
restart failed with "address already in use". ``stop(hold_port=True)`` keeps it bound, not
listening (connects are refused, as to a stopped process), and the restart listens on that very
socket, as the fake cluster's nodes do (``tubemq_aio/testing/_port_hold.py``). Each test stands
another socket on the stopped port, as one given it by the kernel would be; each failed before.
"""

from __future__ import annotations

import pytest

from tests.support.echo_server import FakeServer, request_payload
from tests.support.leak_checks import open_fds, wait_released
from tests.support.port_probes import another_socket_on, refused
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.settings import TransportSettings

pytestmark = [pytest.mark.timeout(30), pytest.mark.also_on_uvloop]
HOST = "127.0.0.1"


async def echo(port: int) -> bytes:
    pool = ConnectionPool(TransportSettings(connect_timeout=10.0))
    try:
        conn = await pool.connection(Address(HOST, port))
        return await conn.call(request_payload(b"back"), 10.0)
    finally:
        await pool.close()


async def test_a_restart_gets_its_port_back_while_another_socket_wants_it() -> None:
    server = await FakeServer().start()
    port = server.port
    try:
        await server.stop(hold_port=True)
        with another_socket_on(port) as taken:
            assert not taken  # the kernel cannot give the port away meanwhile
            assert await refused(port)  # stopped: a connect is refused
            await server.start()
        assert server.port == port
        assert await echo(port) == b"back"
    finally:
        await server.stop()


async def test_a_restart_on_its_explicit_port_then_a_plain_stop_frees_it() -> None:
    server = await FakeServer().start()
    port = server.port
    await server.stop(hold_port=True)
    await server.start(port)
    assert await echo(port) == b"back"
    await server.stop()  # without hold_port: the port is free again
    with another_socket_on(port) as taken:
        assert taken


async def test_a_held_port_is_released_by_a_plain_stop_without_restart() -> None:
    server = await FakeServer().start()
    port = server.port
    before = open_fds()  # after the start: uvloop opens a descriptor of its own at the first
    await server.stop(hold_port=True)
    await server.stop()  # never restarted: the held socket is closed, not leaked
    with another_socket_on(port) as taken:
        assert taken
    await wait_released(before)
