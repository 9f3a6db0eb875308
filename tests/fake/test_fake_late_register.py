"""A consumer's register or unregister that got no answer, executed late by the broker after a
newer registration of the same partition (``Fault.late``), skips nothing
(docs/reliability.md, "A request the broker runs late").

An unregister with ``readStatus`` 0 commits the batch in flight and ends the registration.
Before the fix, a client-balanced consumer that disconnected a partition (its unregister timed
out) and connected it again at once read a batch; the old unregister running then committed
that batch before the application acked it and ended the new registration: the application's
nack came too late, the consumer registered again after the batch, and its ten messages were
lost. Now nothing of the partition is sent to the broker for ``rpc_timeout`` after a call of
it that may still run there: the old unregister runs before the new register.

A ``Consumer`` whose register timed out in a rebalance event (the broker ran it late and held
the partition for it) reported the failure to the master and kept that registration until its
``close()``: whoever the master gave the partition to met 410 until the broker expired it.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_helpers import cb_consumer, group_consumer, produce
from tubemq_aio import ClientBalancedConsumer, ClientClosedError, TubeMQError
from tubemq_aio.consumer.batch import MessageBatch
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

KEY = "1:demo:0"
REGISTER = Method.BROKER_CONSUMER_REGISTER
RPC_S = 3.0
COUNT, BATCH = 30, 10


async def _batch(consumer: ClientBalancedConsumer) -> MessageBatch:
    batch = await consumer.getmany(timeout=10)
    assert len(batch) == BATCH, batch
    return batch


async def _drain(consumer: ClientBalancedConsumer, got: list[bytes]) -> None:
    while len(got) < COUNT:
        batch = await consumer.getmany(timeout=RPC_S + 5)
        assert batch, f"{COUNT - len(got)} message(s) never came"
        got += [m.body for m in batch]
        await batch.ack()
    assert not await consumer.getmany(timeout=0.2)


async def test_an_unregister_run_late_after_a_new_connect_loses_no_unacked_batch() -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with cb_consumer(cluster, "g1", rpc_timeout=RPC_S) as consumer:
            await consumer.connect(KEY)
            first = await _batch(consumer)
            got = [m.body for m in first]
            await first.ack()  # committed: the unregister commits what is in flight then
            cluster.inject(REGISTER, Fault.late())
            await consumer.disconnect(KEY)  # its unregister gives up after RPC_S (logged)
            assert cluster.held_late(REGISTER) == 1
            assert consumer.stats.late_request_waits == 1
            registers = cluster.requests(REGISTER)
            connecting = asyncio.ensure_future(consumer.connect(KEY))
            await asyncio.sleep(RPC_S / 3)
            # not registered again while the unregister may still run
            assert cluster.requests(REGISTER) == registers
            assert not connecting.done()
            assert cluster.release_late(REGISTER) == 1
            await connecting
            second = await _batch(consumer)
            await second.nack()  # read again: nothing committed it
            await _drain(consumer, got)
            assert sorted(got) == sorted(sent)  # every message once
            assert cluster.committed_messages("g1", "demo") == COUNT


async def test_close_ends_a_connect_waiting_out_a_rest_with_client_closed() -> None:
    """A ``connect`` right after a register without answer waits ``rpc_timeout``; a ``close()``
    meanwhile left it waiting the rest out and then meet the closed pool."""
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        consumer = cb_consumer(cluster, "g1", rpc_timeout=30.0)
        await consumer.start()
        cluster.inject(REGISTER, Fault.no_answer(), times=1)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # the register, cut short, rests the partition
                await consumer.connect(KEY)
        connecting = asyncio.ensure_future(consumer.connect(KEY))
        await asyncio.sleep(0.2)
        registers = cluster.requests(REGISTER)
        await consumer.close()
        with pytest.raises(ClientClosedError, match="may still run at the broker"):
            await asyncio.wait_for(connecting, 5)
        # Nothing after the close but the unregister of the register cut short, which the
        # broker may have run (tests/fake/test_fake_consumer_cancel.py).
        assert cluster.requests(REGISTER) == registers + 1


async def test_a_rebalance_register_that_timed_out_is_released_once_it_had_its_time() -> None:
    # balance_period: the master offers the partition to the member again only much later.
    async with FakeCluster(topics={"demo": 1}, balance_period=60) as cluster:
        broker = cluster.brokers[0]
        cluster.inject(REGISTER, Fault.late(RPC_S + 0.5))  # runs after the client gave up
        async with group_consumer(
            cluster, "g1", rpc_timeout=RPC_S, register_attempts=1, close_rebalance_wait=0.1
        ) as consumer:
            await wait_until(lambda: bool(broker.registrations), 20, "the late register")
            assert consumer.assignment() == []  # the event failed: the master hands it out
            # Released after the register's rest (rpc_timeout), not at close: before, the
            # broker kept it for the member until its close or the registration timeout.
            await wait_until(lambda: not broker.registrations, RPC_S + 5, "the release")
            assert consumer.assignment() == []


async def test_a_connect_that_timed_out_is_released_once_its_register_had_its_time() -> None:
    """A ``ClientBalancedConsumer.connect()`` whose register timed out (the broker ran it late
    and held the partition for this consumer) kept that registration until ``disconnect`` or
    ``close()``: another member connecting the partition met 410 until the broker expired
    it. Now it is unregistered once the register had ``rpc_timeout`` more at the broker."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.brokers[0]
        cluster.inject(REGISTER, Fault.late(RPC_S + 0.5), times=1)  # runs after the timeout
        async with cb_consumer(cluster, "g1", rpc_timeout=RPC_S) as consumer:
            with pytest.raises(TubeMQError):
                await consumer.connect(KEY)
            await wait_until(lambda: bool(broker.registrations), 20, "the late register")
            assert consumer.assignment() == []
            await wait_until(lambda: not broker.registrations, RPC_S + 5, "the release")
            async with cb_consumer(cluster, "g1", rpc_timeout=RPC_S) as other:
                await other.connect(KEY)  # no 410: nothing holds the partition any more
                assert other.assignment() == [KEY]


async def test_a_disconnect_whose_unregister_got_no_answer_sends_it_again() -> None:
    """A ``ClientBalancedConsumer.disconnect()`` whose unregister got no answer (the broker
    never ran it) left the partition registered for this consumer until its ``close()``. Now
    the unregister is sent again once the first had ``rpc_timeout`` at the broker, as the
    server-balanced consumer does (``unregister_retry_window``)."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.brokers[0]
        async with cb_consumer(cluster, "g1", rpc_timeout=RPC_S) as consumer:
            await consumer.connect(KEY)
            cluster.inject(REGISTER, Fault.no_answer(), times=1)
            await consumer.disconnect(KEY)  # its unregister gives up after RPC_S (logged)
            assert broker.registrations
            await wait_until(lambda: not broker.registrations, RPC_S + 5, "the release")


async def test_a_close_that_cuts_a_resent_unregister_short_unregisters_once_more() -> None:
    """The client-balanced consumer's release worker resends an unanswered unregister; a
    ``close()`` that cancelled it mid-call took the partition off the list its own final
    unregister pass reads, so the registration stayed at the broker until it expired it."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        broker = cluster.brokers[0]
        consumer = cb_consumer(cluster, "g1", rpc_timeout=RPC_S)
        await consumer.start()
        try:
            await consumer.connect(KEY)
            cluster.inject(REGISTER, Fault.no_answer(), times=2)  # the disconnect's, the resend
            await consumer.disconnect(KEY)  # its unregister gives up after RPC_S
            sent = cluster.requests(REGISTER)
            await wait_until(lambda: cluster.requests(REGISTER) > sent, RPC_S + 5, "the resend")
        finally:
            await consumer.close()  # while the resend waits for its answer
        assert not broker.registrations


@pytest.mark.parametrize("rebalance_wait", [0.1, 5.0], ids=["cut-short", "waited-out"])
async def test_a_server_balanced_close_during_a_resent_unregister_unregisters_once_more(
    rebalance_wait: float,
) -> None:
    """The same for the server-balanced consumer, whose rebalance worker resends the unregister
    of a partition a timed-out rebalance register left registered: a ``close()`` while that
    resend waits for its answer must still unregister the partition, whether the close cancels
    the worker mid-call (``close_rebalance_wait`` short) or lets its wait for the answer end."""
    async with FakeCluster(topics={"demo": 1}, balance_period=60) as cluster:
        broker = cluster.brokers[0]
        cluster.inject(REGISTER, Fault.late(RPC_S + 0.5))  # runs after the client gave up
        consumer = group_consumer(
            cluster,
            "g1",
            rpc_timeout=RPC_S,
            register_attempts=1,
            close_rebalance_wait=rebalance_wait,
        )
        await consumer.start()
        try:
            await wait_until(lambda: bool(broker.registrations), 20, "the late register")
            cluster.inject(REGISTER, Fault.no_answer(), times=1)  # the worker's unregister
            sent = cluster.requests(REGISTER)
            await wait_until(lambda: cluster.requests(REGISTER) > sent, RPC_S + 5, "the resend")
            assert broker.registrations
        finally:
            await consumer.close()  # while the resend waits for its answer
        assert not broker.registrations
