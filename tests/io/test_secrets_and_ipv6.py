"""URL credentials never leak; IPv6 master literals parse and connect (defects 8 and 9).

Each flow fails on purpose (a closed port, a server that hangs up) and everything a user could
see is searched for the password: reprs and str of configs, credentials, clients and errors,
formatted tracebacks, and every log record at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tubemq_aio import (
    ClientBalancedConsumer,
    ClientConfig,
    ConfigError,
    Consumer,
    Credentials,
    Producer,
    ProducerConfig,
    TubeMQError,
)
from tubemq_aio._io.pool import Address
from tubemq_aio.config import HostPort, redact_url

_ClientConfig: Any = ClientConfig
_ProducerConfig: Any = ProducerConfig  # the tests pass what the type hints forbid

pytestmark = pytest.mark.timeout(60)

PASSWORD = "s3cret-Pa55"
ENCODED = "s3cret%2DPa55"


def closed_port(host: str = "127.0.0.1") -> int:
    """A loopback port nobody listens on (bound, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


def seen_by_user(*objects: object, errors: list[BaseException], logs: str) -> str:
    parts = [logs]
    for obj in objects:
        parts += [repr(obj), str(obj)]
    for error in errors:
        parts += [repr(error), str(error), "".join(traceback.format_exception(error))]
        parts += [repr(a) for a in error.args]
    return "\n".join(parts)


def assert_no_secret(text: str) -> None:
    assert PASSWORD not in text
    assert ENCODED not in text
    assert "Pa55" not in text


def test_url_user_info_becomes_credentials() -> None:
    config = ClientConfig.from_url(f"tubemq://admin:{ENCODED}@host:8715,h2")
    assert config.masters == (HostPort("host", 8715), HostPort("h2", 8715))
    assert config.credentials == Credentials("admin", PASSWORD)
    assert_no_secret(repr(config) + str(config) + repr(config.credentials))
    assert "admin" in repr(config.credentials)
    # Percent-encoded separators in either part.
    odd = ClientConfig.from_url("tubemq://us%40er:p%3Aw%40d%2F@h:1")
    assert odd.credentials == Credentials("us@er", "p:w@d/")
    # Keyword credentials win over the URL's.
    other = Credentials("bob", "pw")
    assert ClientConfig.from_url(f"tubemq://a:{PASSWORD}@h", credentials=other).credentials is other


@pytest.mark.parametrize(
    "url",
    [
        f"tubemq://admin@{PASSWORD}",  # no colon: refused before the host part is read
        f"tubemq://:{PASSWORD}@h",
        f"tubemq://admin:{PASSWORD}@",
        f"tubemq://admin:{PASSWORD}@h:notaport",
        f"tubemq://admin:{PASSWORD}@h/path",
        f"tubemq://admin:{PASSWORD}@h?rpc_timeout=nan",
        f"tubemq://admin:{PASSWORD}@h?no_such=1",
        f"tubemq://admin:{PASSWORD}@[::1",
        f"http://admin:{PASSWORD}@h",
        f"admin:{PASSWORD}@h:8715",
    ],
)
def test_bad_urls_never_echo_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        ClientConfig.from_url(url)
    assert_no_secret(seen_by_user(errors=[info.value], logs=""))


@pytest.mark.parametrize(
    "build",
    [
        lambda: _ClientConfig(masters=f"admin:{PASSWORD}@h:8715"),
        lambda: Producer(f"admin:{PASSWORD}@h:8715"),
        lambda: Consumer([f"admin:{PASSWORD}@h"], group="gg", topics=["t"]),
    ],
)
def test_user_info_in_a_master_address_is_refused_unseen(build: Any) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert "credentials" in str(info.value)
    assert_no_secret(seen_by_user(errors=[info.value], logs=""))


def test_redact_url() -> None:
    assert redact_url(f"tubemq://a:{PASSWORD}@h:1?x=1") == "tubemq://***@h:1?x=1"
    assert redact_url("tubemq://h:1") == "tubemq://h:1"
    assert redact_url(f"a:{PASSWORD}@h") == "***@h"


async def test_failed_flows_leak_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = closed_port()
    url = f"tubemq://admin:{ENCODED}@127.0.0.1:{port}?rpc_timeout=3&connect_timeout=0.5"
    errors: list[BaseException] = []
    producer = Producer.from_url(url, register_attempts=1, connection_reuse=False)
    with pytest.raises(TubeMQError) as info:
        await producer.start()
    errors.append(info.value)
    consumer = Consumer.from_url(url, group="gg", topics=["t"], register_attempts=1)
    with pytest.raises(TubeMQError) as info:
        await consumer.start()
    errors.append(info.value)
    balanced = ClientBalancedConsumer.from_url(url, group="gg", topics=["t"], source_count=1)
    with pytest.raises(TubeMQError) as info:
        await balanced.start()
    errors.append(info.value)
    await asyncio.gather(producer.close(), consumer.close(), balanced.close())
    assert producer.config.credentials == Credentials("admin", PASSWORD)
    shown = seen_by_user(
        producer,
        consumer,
        balanced,
        producer.config,
        consumer.config,
        producer.config.credentials,
        errors=errors,
        logs=caplog.text,
    )
    assert_no_secret(shown)
    assert_no_secret("\n".join(repr(r.args) for r in caplog.records))


# ---- IPv6 ---------------------------------------------------------------------------------


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.fixture
async def ipv6_server() -> AsyncIterator[tuple[int, list[str]]]:
    """A ``::1`` listener that records each peer's address and hangs up."""
    if not has_ipv6_loopback():
        pytest.fail("this machine has no IPv6 loopback (::1): the IPv6 test cannot run")
    peers: list[str] = []

    async def on_client(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[0])
        writer.close()

    server = await asyncio.start_server(on_client, "::1", 0)
    try:
        yield server.sockets[0].getsockname()[1], peers
    finally:
        server.close()
        await server.wait_closed()


async def test_ipv6_master_is_connected(ipv6_server: tuple[int, list[str]]) -> None:
    port, peers = ipv6_server
    config = _ProducerConfig(masters=f"[::1]:{port}", register_attempts=1, connection_reuse=False)
    assert config.masters == (HostPort("::1", port),)
    producer = Producer(config=config)
    with pytest.raises(TubeMQError):
        await producer.start()  # the listener hangs up: no register answer
    await producer.close()
    assert peers
    assert peers[0] == "::1"
    assert f"[::1]:{port}" in str(config.masters[0])
    assert str(Address("::1", port, tls=True)) == f"[::1]:{port}/tls"


def test_spark_options_keep_the_password_hidden() -> None:
    from tubemq_aio.spark._options import client_options, parse_client_settings

    good = {"master": "h:8715", "authUser": "admin", "authPassword": PASSWORD}
    settings = parse_client_settings(good)
    kwargs = client_options(good)
    assert kwargs["credentials"] == Credentials("admin", PASSWORD)
    shown = [repr(settings), str(settings), repr(kwargs), str(kwargs)]
    errors: list[BaseException] = []
    for bad in (
        {"master": f"admin:{PASSWORD}@h:8715"},
        good | {"rpcTimeout": "nan"},
        good | {"tls": "maybe"},
        good | {"tlsCaFile": "/ca.pem"},
    ):
        with pytest.raises(ConfigError) as info:
            parse_client_settings(bad)
        errors.append(info.value)
    assert_no_secret(seen_by_user(*shown, errors=errors, logs=""))
