"""A gateway read gathers further broker batches under one lease: GetMessage with
lastPackConsumed commits the batch before it, the answer never passes ``max_messages`` (a batch
that would is rolled back), and the broker cursor ends exactly where the answer ends."""

from __future__ import annotations

import time

from tubemq_aio import Producer
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.testing import FakeCluster

_SOON = 30.0  # gather_until far enough ahead never to end a read here


async def test_gathering_keeps_order_bound_and_cursor() -> None:
    async with FakeCluster(topics={"t": 1}, max_batch=10, max_batch_bytes=2000) as cluster:
        async with Producer(cluster.master_addr, topics=["t"]) as producer:
            for i in range(30):
                await producer.send("t", f"a{i}".encode())
            await producer.send("t", b"B" * 3000)  # a batch of its own (over the byte cap)
            for i in range(25):
                await producer.send("t", f"c{i}".encode())
        tube = TubeGroup(TubeReach(cluster.master_addr, "d"), group="gw-g", topics=["t"])
        try:
            await tube.start()
            (p,) = await tube.partitions(force=True)
            begin, top = await tube.register(p, 0)
            until = time.monotonic() + _SOON

            # 3 batches of 10 fit in 35; a 4th (predicted 10 more) would not: not even read
            first = await tube.read(
                p, begin, cursor_at_start=True, max_messages=35, gather_until=until
            )
            assert [m.body for m in first.messages] == [f"a{i}".encode() for i in range(30)]
            assert (first.status, first.batches, first.rpcs, first.registered) == (
                "ok",
                3,
                4,
                False,
            )

            # 1 big message, then a batch of 10 that would pass 5: read, rolled back
            second = await tube.read(
                p, first.next, cursor_at_start=True, max_messages=5, gather_until=until
            )
            assert [m.body for m in second.messages] == [b"B" * 3000]
            # the last first batch (10) leaves no room at 5: the commit went out with the
            # GetMessage; this first batch (1) left room after all: it was waited for, then
            # GetMessage(lastPackConsumed), rollback (one RPC more than a plain read)
            assert (second.batches, second.rpcs) == (1, 4)

            # the rollback left the cursor where the answer ended: no register, no resync
            third = await tube.read(p, second.next, cursor_at_start=True)
            assert [m.body for m in third.messages] == [f"c{i}".encode() for i in range(10)]
            assert (third.batches, third.rpcs, third.registered, third.resync) == (1, 2, False, "")

            # gathering ends at the partition's end (404) and commits what it holds
            rest = await tube.read(
                p, third.next, cursor_at_start=True, max_messages=1000, gather_until=until
            )
            assert [m.body for m in rest.messages] == [f"c{i}".encode() for i in range(10, 25)]
            assert (rest.batches, rest.next, rest.resync) == (2, rest.max, "")
            assert rest.next > begin
            assert top <= rest.max

            # past gather_until only the first batch is read
            again = await tube.read(p, begin, cursor_at_start=False, max_messages=1000)
            assert (len(again.messages), again.batches, again.registered) == (10, 1, True)
        finally:
            await tube.close()
