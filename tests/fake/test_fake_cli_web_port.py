"""``tubemq-aio topics`` / ``groups`` with ``--web`` at a TubeMQ client (RPC) port, the master's
8715 instead of its web port: the master reads the HTTP request as frame garbage and answers
nothing, so the command waited the web API's whole 10 s timeout and then said "timed out". It
fails at once now, naming the port to give instead (the reverse mistake, the SDK pointed at a
web port, has had such a hint since the transport reads an HTTP answer as one)."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio.cli import main
from tubemq_aio.testing import FakeCluster


@pytest.mark.parametrize("command", [["topics"], ["groups"]])
async def test_web_at_a_client_port_fails_at_once_naming_the_web_port(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        for address in (cluster.master_addr, cluster.broker_addr(1)):
            async with asyncio.timeout(5):  # the web API's timeout is 10 s
                code = await asyncio.to_thread(main, [*command, "--web", address])
            assert code == 1
            (line,) = capsys.readouterr().err.splitlines()
            assert f"{address} is a TubeMQ client (RPC) port" in line
            assert "web port" in line
            assert "8080" in line


@pytest.mark.parametrize(
    "command", [["partitions", "--topic", "demo"], ["produce", "--topic", "demo"]]
)
async def test_master_at_a_broker_port_names_the_master_port(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The reverse of ``--web`` at a client port: ``--master`` at a broker's client port said
    only ``ServiceNotPublishedError: java.lang.Exception: No service 1 found on the server``."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        address = cluster.broker_addr(1)
        async with asyncio.timeout(30):
            argv = [*command, "--master", address] + (
                ["/dev/null"] if command[0] == "produce" else []
            )
            code = await asyncio.to_thread(main, argv)
        assert code == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert "No service 1 found" in line
        assert f"{address} is a TubeMQ node without the master service" in line
        assert f"the address came from --master {address}" in line
        assert "8715" in line
        assert line.count("8715") == 1  # said once, by the error


async def test_web_at_a_legacy_client_port_names_it_as_the_client_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A client port of a TubeMQ 1.1/1.2 server (length-prefixed framing) goes silent on the
    bare frame the probe sent, so the listing waited 10 s and said "timed out"; the probe now
    also asks in that framing."""
    async with FakeCluster(topics={"demo": 1}, framing="legacy-length") as cluster:
        for address in (cluster.master_addr, cluster.broker_addr(1)):
            async with asyncio.timeout(5):  # the web API's timeout is 10 s
                code = await asyncio.to_thread(main, ["topics", "--web", address])
            assert code == 1
            (line,) = capsys.readouterr().err.splitlines()
            assert f"{address} is a TubeMQ client (RPC) port of a 1.1/1.2 server" in line
            assert "8080" in line
