"""``tubemq-aio topics``/``groups`` with ``--web`` at a port that accepts connections and never
answers: the listing waited the web API's whole 10 s timeout (after a 1 s probe) and then said
only "timed out". The probe now gives the address ``--web-timeout`` (3 s by default) to start
answering and names what was expected; a web API that answers its query slowly still works
(the probe's HTTP request is answered before the web API computes anything)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest

from tubemq_aio.cli import main
from tubemq_aio.cli._web_port import WebPort, probe_web_port

#: How long the slow web API below takes to answer a query: longer than the probe's deadline.
SLOW_QUERY = 0.5
PROBE = 0.2


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # reads until the client leaves; answers nothing
    writer.close()


async def _slow_web_api(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    if head.startswith(b"POST /webapi.htm"):
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)  # the form
        await asyncio.sleep(SLOW_QUERY)
        body = json.dumps({"result": True, "errCode": 0, "errMsg": "OK", "data": []}).encode()
    else:
        body = b"not found"
    writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    writer.close()


@pytest.fixture
async def silent() -> AsyncIterator[int]:
    server = await asyncio.start_server(_silent, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


@pytest.fixture
async def slow_web_api() -> AsyncIterator[int]:
    server = await asyncio.start_server(_slow_web_api, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_the_probe_tells_a_silent_port(silent: int) -> None:
    assert await probe_web_port("127.0.0.1", silent, PROBE) is WebPort.SILENT


@pytest.mark.parametrize("command", ["topics", "groups"])
async def test_a_silent_port_fails_within_the_web_timeout_naming_what_was_expected(
    command: str, silent: int, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{silent}"
    async with asyncio.timeout(5):  # the web API's own timeout is 10 s
        code = await asyncio.to_thread(
            main, [command, "--web", address, "--web-timeout", str(PROBE)]
        )
    assert code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert f"master web API at {address}: {address} accepted a connection" in line
    assert f"answered neither HTTP nor TubeMQ within {PROBE:g} s (--web-timeout)" in line
    assert "8080" in line


async def test_a_slow_but_real_web_api_is_not_failed_by_the_probe(
    slow_web_api: int, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{slow_web_api}"
    assert await probe_web_port("127.0.0.1", slow_web_api, PROBE) is WebPort.HTTP
    code = await asyncio.to_thread(
        main, ["topics", "--web", address, "--web-timeout", str(PROBE), "--format", "json"]
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("given", ["0", "-1", "nan", "inf", "1e400", "abc", ""])
def test_the_web_timeout_must_be_positive(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["topics", "--web", "127.0.0.1:1", "--web-timeout", given])
    assert done.value.code == 2
    assert "--web-timeout" in capsys.readouterr().err


async def test_a_connect_nothing_answers_is_named_as_such(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host that drops the connect (no refusal): the listing waited urllib's 10 s."""

    async def never(*args: object, **kwargs: object) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio, "open_connection", never)
    assert await probe_web_port("127.0.0.1", 1, PROBE) is WebPort.NO_CONNECTION
    code = await asyncio.to_thread(
        main, ["groups", "--web", "127.0.0.1:1", "--web-timeout", str(PROBE)]
    )
    assert code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert f"no connection to 127.0.0.1:1 within {PROBE:g} s (--web-timeout)" in line
