"""A tail check's probe register that got no answer, executed late by the broker
(``Fault.late``), skips nothing (docs/reliability.md, "A request the broker runs late").

A probe registers the group at a remembered offset, above where the check then resumes when
the broker replaced what the consumer had read (issue 30). Before the fix, a probe register
that timed out failed the check, the group was registered back at once and the re-connect
checked again and resumed at the offset found; the old probe register running after that
moved the group's cursor back up to the probe's offset, and the new messages below it never
came. Now nothing of the partition is sent to the broker for ``rpc_timeout`` after a call of it
that may still run there: a late request that runs by then is undone by the register back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.support.fake_helpers import Opener, consumer_openers
from tests.support.tail_helpers import (
    assert_new_delivered,
    crash_and_refill,
    read_old,
    read_until,
)
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing import FakeCluster, Fault, wait_until

KEY = "1:demo:0"
REGISTER = Method.BROKER_CONSUMER_REGISTER
GET = Method.BROKER_CONSUMER_GET_MESSAGE
RPC_S = 3.0


class LateProbe:
    """Holds the first probe register of the check (the register after the one that brings
    the partition back) with ``Fault.late``, and runs it at the latest just before the
    consumer's first fetch after a finished check (the worst moment for it)."""

    def __init__(self, cluster: FakeCluster, checks_done: Callable[[], bool]) -> None:
        self._cluster = cluster
        self._checks_done = checks_done
        self.armed = False
        node = cluster.brokers[0].node
        self._register: Callable[[RpcRequest], bytes] = node.handlers[int(REGISTER)]
        self._get: Callable[[RpcRequest], bytes] = node.handlers[int(GET)]
        node.handlers[int(REGISTER)] = self._on_register
        node.handlers[int(GET)] = self._on_get

    def _on_register(self, request: RpcRequest) -> bytes:
        answer = self._register(request)
        req = pb.RegisterRequestC2B.FromString(request.body)
        ok = pb.RegisterResponseB2C.FromString(answer).success
        if not self.armed and ok and req.opType == 31 and not req.HasField("currOffset"):
            self.armed = True  # the partition is back: its check's first probe comes next
            self._cluster.inject(REGISTER, Fault.late())
        return answer

    def _on_get(self, request: RpcRequest) -> bytes:
        if self._checks_done() and self._cluster.held_late(REGISTER):
            self._cluster.release_late(REGISTER)
        return self._get(request)


OPENERS = consumer_openers(RPC_S, reconnect_delay_max=1.0)


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
async def test_a_probe_register_run_late_skips_nothing(
    opener: Opener,
) -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster, opener(cluster) as consumer:
        old = await read_old(cluster, consumer)
        gate, new = await crash_and_refill(cluster, consumer)
        LateProbe(cluster, lambda: consumer.stats.tail_checks > 0)
        gate.open()
        await wait_until(lambda: cluster.held_late(REGISTER) == 1, 30, "a probe held")
        registers = cluster.requests(REGISTER)
        await asyncio.sleep(RPC_S * 1.5)  # the probe gave up RPC_S after it was sent
        # nothing of the partition went to the broker since: the probe may still run
        assert cluster.requests(REGISTER) == registers
        cluster.release_late(REGISTER)  # (if the check did not go on and run it)
        got = await read_until(consumer, set(new), timeout=30)
        assert_new_delivered(consumer, got, old, new)
        assert consumer.stats.late_request_waits >= 1
