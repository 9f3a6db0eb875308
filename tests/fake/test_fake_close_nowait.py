"""``close()`` cutting short sends of ``send_nowait`` whose futures nobody kept logs once.

Found by closing a producer with 256 fire-and-forget sends a broker never answered: each
future failed with ``ClientClosedError`` and, nobody having looked at it, asyncio logged
"Future exception was never retrieved" with a traceback for each of the 256, besides close()'s
own "closing with 256 sends still pending". A future the caller keeps still raises it; one
that fails otherwise (a broker's refusal) is still reported when nobody looked.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from tubemq_aio import ClientClosedError, Producer, ServerError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

pytestmark = pytest.mark.timeout(60)
SEND = Method.BROKER_PRODUCER_SEND_MESSAGE
NEVER_RETRIEVED = "exception was never retrieved"


async def test_close_cuts_short_fire_and_forget_sends_without_a_log_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:
        producer = Producer(cluster.master_addr, topics=["demo"], close_grace=0.2)
        await producer.start()
        cluster.inject(SEND, Fault.no_answer(), times=None)
        kept = producer.send_nowait("demo", b"kept", timeout=30)
        for _ in range(64):
            producer.send_nowait("demo", b"dropped", timeout=30)
        await asyncio.sleep(0.1)  # every request written, none answered
        with caplog.at_level(logging.WARNING):
            await producer.close()
            await asyncio.sleep(0)
            gc.collect()
        with pytest.raises(ClientClosedError):
            await kept
        assert producer.failed == 65
    assert [r for r in caplog.records if NEVER_RETRIEVED in r.getMessage()] == []
    assert [r.getMessage() for r in caplog.records if "still pending" in r.getMessage()] == [
        "closing with 65 sends still pending after close_grace (0.2 s)"
    ]


async def test_a_refusal_nobody_looked_at_is_still_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.error(403), times=1)
        future = producer.send_nowait("demo", b"refused")
        await asyncio.wait([future])
        assert isinstance(future.exception(), ServerError)
        with caplog.at_level(logging.ERROR):
            cluster.inject(SEND, Fault.error(403), times=1)
            dropped = producer.send_nowait("demo", b"refused too")
            await asyncio.wait([dropped])
            del dropped
            gc.collect()
    assert [r for r in caplog.records if NEVER_RETRIEVED in r.getMessage()] != []
