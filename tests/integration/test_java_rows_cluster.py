"""The Java client's rows on the real cluster: the master's consume-from-max control.

The master web call ``admin_set_client_balance_group_consume_from_max`` gives a client-balanced
group a new control id; the consumer's next heartbeat carries it, and every fetched partition
restarts at its max offset (docs/protocol/consumer.md §8.2). The same scenario runs against
FakeCluster in tests/fake/test_fake_java_rows.py.
"""

from __future__ import annotations

from tubemq_aio import Producer
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.testing import LocalCluster, wait_until


async def test_consume_from_max_control_moves_a_client_balanced_consumer(
    cluster: LocalCluster, topic: str
) -> None:
    """Read from the earliest message, then the operator's control: only later messages come."""
    group = f"gmax_{topic}"
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        for i in range(12):
            await producer.send(topic, f"old-{i}".encode())
    consumer = ClientBalancedConsumer(
        cluster.master_addr,
        group=group,
        topics=[topic],
        source_count=1,
        node_id=0,
        consume_from="earliest",
        heartbeat_interval=1.0,
        auto_ack=False,
    )
    async with consumer:
        for meta in await consumer.partitions():
            await consumer.connect(meta.partition_key)
        batch = await consumer.getmany(timeout=20)
        assert batch
        await batch.nack()  # every group offset stays at the earliest message
        tops = {k: p.max_offset for k, p in consumer.positions().items()}
        assert any(p.current_offset < tops[k] for k, p in consumer.positions().items())
        await cluster.web_api.call(
            "admin_set_client_balance_group_consume_from_max", modify=True, groupName=group
        )
        await wait_until(
            lambda: all(p.current_offset == tops[k] for k, p in consumer.positions().items()),
            30,
            "every partition moved to its max offset",
        )
        async with Producer(cluster.master_addr, topics=[topic]) as producer:
            await producer.send(topic, b"late-0")
        got: list[bytes] = []
        while not got:
            more = await consumer.getmany(timeout=20)
            assert more, "nothing after the reset"
            got.extend(m.body for m in more)
            await more.ack()
        assert got == [b"late-0"]
