"""``tubemq-aio topics``/``groups`` and :class:`~tubemq_aio.admin.MasterWebApi` at addresses a
user gets wrong (found by an adversarial review): a port whose server is not HTTP (an SSH
banner) crashed the listing with ``http.client.BadStatusLine`` and a traceback, and escaped the
web API client's documented ``OSError``/``AdminApiError``; an IPv6 master was named without
brackets (``::1:8080``, which ``--web`` then refuses), and a ``--master`` that gave no usable
host was reported as ``--web None``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tubemq_aio.admin import MasterWebApi
from tubemq_aio.cli import main
from tubemq_aio.cli._listing import web_endpoint
from tubemq_aio.errors import AdminApiError, ConfigError


async def _banner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-OpenSSH_9.0\r\n")
    await reader.read(65536)  # the request, then the connection stays open until it ends
    await reader.read(65536)
    writer.close()


@pytest.fixture
async def not_http() -> AsyncIterator[int]:
    """The port of a server that answers with an SSH banner (not HTTP)."""
    server = await asyncio.start_server(_banner, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_the_sdk_client_reports_a_server_that_is_not_http(not_http: int) -> None:
    api = MasterWebApi("127.0.0.1", not_http, timeout=5)
    with pytest.raises(OSError, match="not an HTTP answer"):
        await api.raw("admin_query_topic_info")
    with pytest.raises(AdminApiError, match="not an HTTP answer"):
        await api.query("admin_query_topic_info")


async def test_the_listing_names_a_server_that_is_not_http_in_one_line(
    not_http: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(main, ["topics", "--web", f"127.0.0.1:{not_http}"])
    assert code == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert f"master web API at 127.0.0.1:{not_http}: not an HTTP answer" in err[0]


def test_an_ipv6_master_or_web_address_keeps_its_brackets_in_lines() -> None:
    assert web_endpoint(None, "[::1]:8715") == ("::1", 8080)
    assert web_endpoint("[::1]:8081", None) == ("::1", 8081)


def test_the_listing_names_an_ipv6_web_address_as_it_can_be_given_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Port 1, where nothing listens; the web port derived from --master, 8080, may be a
    # running cluster's web API (web_endpoint's derivation is asserted above).
    assert main(["topics", "--web", "[::1]:1"]) == 1
    err = capsys.readouterr().err
    assert "master web API at [::1]:1:" in err
    assert "::1:1" not in err.replace("[::1]:1", "")


def test_a_master_address_is_read_as_the_clients_read_it() -> None:
    assert web_endpoint(None, "::1") == ("::1", 8080)  # a bare IPv6 literal, as for clients
    with pytest.raises(ConfigError) as info:
        web_endpoint(None, "h:notaport")
    text = str(info.value)
    assert "--master 'h:notaport'" in text
    assert "--web None" not in text
