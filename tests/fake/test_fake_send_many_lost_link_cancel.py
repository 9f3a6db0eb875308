"""``send_many`` cancelled just after its connection failed every request it had in flight.

Found by an adversarial review: the link broke (every answer future failed at once) and the
call was cancelled before it had looked at them; it forgot the requests but not their futures'
errors, so asyncio logged "exception was never retrieved" once per message in flight (19 lines
for a list of 20), for futures the user never saw. Same with the compiled answer future and
with asyncio's.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from tubemq_aio import Producer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

pytestmark = pytest.mark.timeout(60)
NEVER_RETRIEVED = "exception was never retrieved"


async def test_a_cancel_right_after_the_link_failed_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        await producer.send("demo", b"warm")
        cluster.inject(Method.BROKER_PRODUCER_SEND_MESSAGE, Fault.no_answer(), times=None)
        task = asyncio.ensure_future(producer.send_many("demo", [b"x"] * 20, timeout=30))
        assert producer._pool is not None
        await wait_until(lambda: producer.in_flight == 20, 10, "every request written")
        connections = list(producer._pool.connections.values())
        with caplog.at_level(logging.ERROR):
            for conn in connections:
                conn.abort()  # every request in flight fails now, the call not yet woken
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            del task
            gc.collect()
            await asyncio.sleep(0)
        assert (producer.sent, producer.cancelled) == (1, 20)
        assert producer.in_flight == 0
    assert [r.getMessage() for r in caplog.records if NEVER_RETRIEVED in r.getMessage()] == []
