"""A consumer's GetMessage or CommitOffset that got no answer, executed late by the broker
(``Fault.late``), skips no message (docs/reliability.md, "A request the broker runs late").

The broker keeps one batch in flight per group and partition, whichever connection read it
(docs/protocol/consumer.md §4.2). Before the fix a fetch that timed out was tried again 200 ms
later: a late GetMessage (with the commit flag, as every fetch after an ack carries) that ran
after that read committed the batch the app held and read the next one, which the app's ack then
committed unseen (10 messages of 30 lost, found with this fault); a late CommitOffset that ran
after the next read committed a batch before the app acked it, so a nack lost it. Now the
partition is not read again for ``rpc_timeout`` after such a call: a late request that runs by
then commits nothing the app did not ack, and the read after it starts at the committed offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.support.fake_helpers import AnyConsumer, Opener, consumer_openers, produce
from tubemq_aio.consumer.batch import MessageBatch
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

GET = Method.BROKER_CONSUMER_GET_MESSAGE
COMMIT = Method.BROKER_CONSUMER_COMMIT
RPC_S = 3.0  # the least rpc_timeout: the partition rests this long after a call without answer
COUNT, BATCH = 30, 10

OPENERS = consumer_openers(RPC_S)
_server_balanced = OPENERS["server-balanced"]


async def _batch(consumer: AnyConsumer) -> MessageBatch:
    batch = await consumer.getmany(timeout=10)
    assert len(batch) == BATCH, batch
    return batch


async def _rest_then_release(
    cluster: FakeCluster, consumer: AnyConsumer, method: Method, gave_up: Callable[[], bool]
) -> None:
    """Wait for the call to give up, check the partition rests (no read), then let the held
    request run: inside the window the consumer waits for."""
    await wait_until(gave_up, RPC_S + 5, f"the {method.name} call gave up")
    reads = cluster.requests(GET)
    await asyncio.sleep(RPC_S / 3)  # well past the 200 ms retry of a failed fetch
    assert cluster.requests(GET) == reads  # not read again while the request may still run
    assert cluster.release_late(method) == 1
    assert consumer.stats.late_request_waits == 1


async def _drain(consumer: AnyConsumer, got: list[bytes]) -> None:
    """Read and ack until every message came (a skipped one never does: the wait fails)."""
    while len(got) < COUNT:
        batch = await consumer.getmany(timeout=RPC_S + 2)
        assert batch, f"{COUNT - len(got)} message(s) never came"
        got += [m.body for m in batch]
        await batch.ack()
    assert not await consumer.getmany(timeout=0.2)  # and nothing more


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
async def test_a_timed_out_get_message_run_late_skips_nothing(
    opener: Opener,
) -> None:
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with opener(cluster) as consumer:
            first = await _batch(consumer)
            got = [m.body for m in first]
            cluster.inject(GET, Fault.late())  # the next read, with the commit flag
            await first.ack()
            await _rest_then_release(
                cluster, consumer, GET, lambda: consumer.stats.fetch_errors > 0
            )
            await _drain(consumer, got)
            assert sorted(got) == sorted(sent)  # every message once: nothing skipped
            assert cluster.committed_messages("g1", "demo") == COUNT


async def test_a_get_message_whose_connection_was_reset_run_late_skips_nothing() -> None:
    """The reconnect case: the connection breaks with the read out (the consumer reads the
    partition again on a new connection), and the broker runs the old read after all."""
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with _server_balanced(cluster) as consumer:
            first = await _batch(consumer)
            got = [m.body for m in first]
            cluster.inject(GET, Fault.late())
            await first.ack()
            await wait_until(lambda: cluster.held_late(GET) == 1, 5, "the read arrived")
            cluster.drop_connections()  # every link resets: the read fails at once
            await _rest_then_release(
                cluster, consumer, GET, lambda: consumer.stats.fetch_errors > 0
            )
            await _drain(consumer, got)
            assert sorted(got) == sorted(sent)
            assert cluster.committed_messages("g1", "demo") == COUNT


async def test_a_timed_out_commit_run_late_commits_no_batch_the_app_did_not_ack() -> None:
    # The same fetch engine serves both consumers: the server-balanced one stands for both.
    async with FakeCluster(topics={"demo": 1}, max_batch=BATCH) as cluster:
        sent = await produce(cluster.master_addr, "demo", COUNT)
        async with _server_balanced(cluster) as consumer:
            first = await _batch(consumer)
            got = [m.body for m in first]
            cluster.inject(COMMIT, Fault.late())
            acking = asyncio.ensure_future(first.ack())  # its commit times out
            await _rest_then_release(cluster, consumer, COMMIT, acking.done)
            await acking
            second = await _batch(consumer)
            assert cluster.committed_messages("g1", "demo") == BATCH  # the first batch only
            await second.nack()  # read again: the late commit did not take it
            await _drain(consumer, got)
            assert sorted(got) == sorted(sent)
            assert cluster.committed_messages("g1", "demo") == COUNT
