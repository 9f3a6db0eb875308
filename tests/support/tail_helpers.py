"""The scenario of a broker that comes back without its unflushed tail and stores new
messages past the group's offset before the group registers there again (issue 30), shared by
the server- and client-balanced consumers' tail-check tests on :class:`FakeCluster`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.support.fake_helpers import drain, produce
from tubemq_aio import ClientBalancedConsumer, Consumer
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing import FakeCluster, wait_until
from tubemq_aio.testing._fake_store import INDEX_UNIT

__all__ = [
    "LOST",
    "NEW",
    "OLD",
    "PER_ROUND",
    "ROUNDS",
    "RegisterGate",
    "assert_new_delivered",
    "crash_and_refill",
    "read_old",
    "read_until",
]

AnyConsumer = Consumer | ClientBalancedConsumer

ROUNDS = 4  # the old messages are produced and read in rounds: several batches remembered
PER_ROUND = 10
OLD = ROUNDS * PER_ROUND
LOST = 12  # the newest old messages the broker forgets (more than the last batch)
NEW = 30  # produced after the restart, before the group registers again: past its offset


class RegisterGate:
    """Makes broker 1 refuse (500) every consumer register until :meth:`open`: the group
    cannot register there again before the test produced the new messages."""

    def __init__(self, cluster: FakeCluster) -> None:
        node = cluster.brokers[0].node
        self._register: Callable[[RpcRequest], bytes] = node.handlers[
            int(Method.BROKER_CONSUMER_REGISTER)
        ]
        self.refused = 0
        self.closed = True
        node.handlers[int(Method.BROKER_CONSUMER_REGISTER)] = self._handle

    def _handle(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2B.FromString(request.body)
        if self.closed and req.opType == 31:
            self.refused += 1
            return pb.RegisterResponseB2C(
                success=False, errCode=500, errMsg="held by the test"
            ).SerializeToString()
        return self._register(request)

    def open(self) -> None:
        self.closed = False


async def read_old(cluster: FakeCluster, consumer: AnyConsumer) -> list[bytes]:
    """Produce and read :data:`ROUNDS` rounds of :data:`PER_ROUND` messages (group ``g1``,
    partition ``1:demo:0``), until the group's stored offset is past them all; returns the
    bodies."""
    old: list[bytes] = []
    for i in range(ROUNDS):
        sent = await produce(cluster.master_addr, "demo", PER_ROUND, prefix=f"old{i}")
        assert sorted(await drain(consumer, PER_ROUND, timeout=20)) == sorted(sent)
        old += sent
    await wait_until(
        lambda: cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT,
        10,
        "the group's offset stored after the old messages",
    )
    return old


async def crash_and_refill(
    cluster: FakeCluster, consumer: AnyConsumer
) -> tuple[RegisterGate, list[bytes]]:
    """Kill broker 1, start it without its newest :data:`LOST` messages, hold the group's
    registers off and produce :data:`NEW` messages, which fill the store past the group's
    stored offset (the case nothing in the register answer shows)."""
    await cluster.stop_broker(1)
    gate = RegisterGate(cluster)
    lost = await cluster.start_broker(1, lose_newest=LOST)
    assert len(lost) == LOST
    new = await produce(cluster.master_addr, "demo", NEW, prefix="new")
    store = cluster.brokers[0].log("demo", 0)
    assert store.max_offset == (OLD - LOST + NEW) * INDEX_UNIT
    assert cluster.group_offset("g1", 1, "demo", 0) == OLD * INDEX_UNIT < store.max_offset
    # The group waits for its partition back (dropped after the broker went away).
    await wait_until(lambda: gate.refused > 0, 30, "a register held off")
    assert consumer.assignment() == []
    return gate, new


async def read_until(consumer: AnyConsumer, wanted: set[bytes], timeout: float) -> list[bytes]:
    """Every message that arrives (acked) until all of ``wanted`` did, or ``timeout`` s; then
    0.5 s more to see what else comes."""
    got: list[bytes] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not wanted <= set(got) and loop.time() < deadline:
        async with await consumer.getmany(timeout=0.5) as batch:
            got.extend(m.body for m in batch)
    async with await consumer.getmany(timeout=0.5) as batch:
        got.extend(m.body for m in batch)
    return got


def assert_new_delivered(
    consumer: AnyConsumer, got: list[bytes], old: list[bytes], new: list[bytes]
) -> None:
    """After :func:`crash_and_refill` and the gate opened: every new message came once, old
    ones came again only from the offset the check moved back to (at least once; at most the
    survivors of the lost region's search, bounded by what was read), and the stats show one
    check that moved the group back where the register answer showed nothing."""
    assert sorted(m for m in got if m.startswith(b"new")) == sorted(new)  # each once
    again = [m for m in got if not m.startswith(b"new")]
    assert set(again) <= set(old[: OLD - LOST])
    assert len(again) <= OLD - LOST
    stats = consumer.stats
    assert (stats.tail_checks, stats.tail_rewinds, stats.tail_unverified) == (1, 1, 0)
    assert stats.offset_rewinds == 0  # the register answer showed nothing
