"""A connection driven through an in-memory transport: responses split and reordered at random."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.echo_server import MemoryTransport, request_payload
from tests.support.examples import examples
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import decode_request, encode_success


@settings(max_examples=examples(40), deadline=None)
@given(
    count=st.integers(1, 40),
    data=st.data(),
)
def test_split_and_reordered_responses_resolve_their_own_calls(count: int, data: Any) -> None:
    async def scenario() -> None:
        conn = Connection("memory", TransportSettings())
        transport = MemoryTransport()
        conn.connection_made(transport)
        bodies = [b"body-%d" % i * (i % 5 + 1) for i in range(count)]
        calls = [asyncio.ensure_future(conn.call(request_payload(b), 5.0)) for b in bodies]
        for _ in range(2):  # the callers' first steps, then the one scheduled flush
            await asyncio.sleep(0)
        assert transport.writes == 1  # every frame of the tick in one write
        requests = FrameDecoder().feed(bytes(transport.written))
        answers = [
            encode_frame(serial, encode_success(1, decode_request(payload).body))
            for serial, payload in requests
        ]
        order = data.draw(st.permutations(range(count)))
        stream = b"".join(answers[i] for i in order)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
        start = 0
        for cut in [*cuts, len(stream)]:
            conn.data_received(stream[start:cut])
            start = cut
        assert await asyncio.gather(*calls) == bodies
        assert conn.in_flight == 0
        conn.connection_lost(None)

    asyncio.run(scenario())
