"""A master address that answers in another protocol (a web port given for a master's client port,
another service) fails a client's start at its first answer. The register went on for the
``register_attempts`` window, about 4 s of four identical ``FrameError``s, though the first one
already showed the address does not speak TubeMQ."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from tubemq_aio import ClientBalancedConsumer, Consumer, FrameError, Producer

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def web_page_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering every connection with an HTML page and closing it; yields its address
    and the list of connections it answered (one 1 per connection)."""
    answered: list[int] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered.append(1)
        await reader.read(1)
        writer.write(b"<!DOCTYPE HTML>\n<html><body>Error 400</body></html>\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", answered
    finally:
        server.close()
        await server.wait_closed()


CLIENTS: list[Callable[[str], Producer | Consumer | ClientBalancedConsumer]] = [
    lambda master: Producer(master, topics=["demo"]),
    lambda master: Consumer(master, group="gweb", topics=["demo"]),
    lambda master: ClientBalancedConsumer(master, group="gweb", topics=["demo"]),
]


@pytest.mark.parametrize("make", CLIENTS, ids=["producer", "consumer", "client-balanced"])
async def test_a_start_against_a_web_port_fails_at_the_first_answer(
    make: Callable[[str], Producer | Consumer | ClientBalancedConsumer],
) -> None:
    async with web_page_server() as (master, answered):
        client = make(master)
        with pytest.raises(FrameError, match=r"bad frame begin token .* answered in HTTP or HTML"):
            await client.start()
        await client.close()
        assert len(answered) == 1
