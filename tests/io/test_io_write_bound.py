"""The write buffer's high-water mark bounds what one tick queues for a peer that stops reading.

Found by sending large messages to a broker that stopped reading: every request registered in
one tick was joined and handed to the transport at once, so ``write_high_water`` (1 MiB) only
held back the next tick's senders. 512 concurrent 1 MiB sends grew the client by 1.5 GB, and
every one of them ended as "outcome unknown" (its bytes were queued on our side, never read)
where a send that found no room ends as "not sent", safe to retry. Now a tick whose queued
frames of more than one block reach the mark writes them at once, the transport pauses, and the
later senders wait for room until their deadline.

Then found by an adversarial review: frames of one block (up to 8 KiB, most messages) were
still all written at the tick's end: 3 000 sends of 8 KB with a 16 KiB mark queued 4.4 MB. Now
every frame counts towards the mark.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.support.echo_server import FakeServer, limit_send_buffer, small_buffers
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.errors import RequestTimeoutError, WriteTimeoutError
from tubemq_aio.protocol.rpc import Method

pytestmark = [pytest.mark.timeout(60), pytest.mark.also_on_uvloop]


@pytest.mark.parametrize(
    ("chunk", "calls"),
    [(64 * 1024, 64), (7 * 1024, 600)],  # 4 MiB either way, 64 times the 64 KiB mark
    ids=["frames-of-many-blocks", "frames-of-one-block"],
)
async def test_one_tick_of_calls_queues_about_the_high_water_mark(
    server: FakeServer, chunk: int, calls: int
) -> None:
    settings = small_buffers()
    pool = ConnectionPool(settings)
    rpc = RpcClient(pool)
    try:
        server.knobs.pause_reading = True
        address = Address("127.0.0.1", server.port)
        conn = await rpc.connect(address)
        limit_send_buffer(conn)
        method = Method.MASTER_PRODUCER_HEARTBEAT
        started = [
            asyncio.create_task(rpc.call(address, method, b"z" * chunk, 1.0)) for _ in range(calls)
        ]
        await asyncio.sleep(0.1)  # every call has run: written, or waiting for room
        transport = conn._transport
        assert transport is not None
        queued = transport.get_write_buffer_size()
        assert conn.writing_paused
        # Below the mark when the tick's frames reaching it were written, plus those frames.
        assert queued <= 2 * settings.write_high_water + chunk + 1024
        outcomes = Counter(type(o) for o in await asyncio.gather(*started, return_exceptions=True))
        assert set(outcomes) <= {RequestTimeoutError, WriteTimeoutError}
        # Most calls never left: not sent (safe to retry), not "may have been processed".
        assert outcomes[WriteTimeoutError] >= calls // 2
    finally:
        await pool.close()
