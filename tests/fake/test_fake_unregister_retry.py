"""A ``Consumer``'s unregister of a partition the master moved away that gets no answer (the
broker never ran it) is sent again once it had ``rpc_timeout``: before, nothing more was sent,
the broker kept the partition registered for this consumer, and the member the master gave it
to met 410 until the broker expired the registration (``consumerRegTimeoutMs``, 35 s on a real
broker; 300 s here, so only the fix ends it in time)."""

from __future__ import annotations

from tests.support.fake_helpers import group_consumer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

REGISTER = Method.BROKER_CONSUMER_REGISTER
RPC_S = 3.0


async def test_an_unanswered_rebalance_unregister_is_sent_again() -> None:
    async with (
        FakeCluster(topics={"demo": 2}, registration_timeout=300) as cluster,
        group_consumer(cluster, "g1", rpc_timeout=RPC_S) as first,
    ):
        await wait_until(lambda: len(first.assignment()) == 2, 20, "both partitions")
        registers = cluster.requests(REGISTER)
        # The next broker register call is the unregister of the partition moved away.
        cluster.inject(REGISTER, Fault.no_answer())
        async with group_consumer(cluster, "g1", rpc_timeout=RPC_S) as second:
            await wait_until(
                lambda: len(second.assignment()) == 1, RPC_S * 4 + 20, "the moved partition"
            )
            assert len(first.assignment()) == 1
            assert set(first.assignment()).isdisjoint(second.assignment())
        assert first.stats.late_request_waits >= 1  # the unregister without answer
        # The unanswered unregister, its retry and the new holder's register(s).
        assert cluster.requests(REGISTER) >= registers + 3
