"""A master's start fails when another node answers on its web port (the CI failure, rebuilt).

The "JVM" is a stand-in that only sleeps (so the master's own web API never comes up), and a
loopback HTTP server on the master's web port answers in its place, with the replies a TubeMQ
broker or another cluster's master gives. Before the identity check, the readiness call
(``admin_query_server_version``, which brokers answer too) passed against a broker, and the
start went on until ``admin_add_broker_configure`` was refused with "Unsupported method".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.master_web_answers import Answers, Reply, broker, master_of, stand_in_master
from tubemq_aio.testing import PortConflictError
from tubemq_aio.testing._nodes import MasterNode
from tubemq_aio.testing._ports import PortLease


@pytest.fixture
def ports() -> Iterator[list[int]]:
    """RPC, web and replication ports of the master, reserved for the test."""
    lease = PortLease()
    yield lease.take(3)
    lease.release()


def _master(tmp_path: Path, ports: list[int]) -> MasterNode:
    return stand_in_master(tmp_path, ports, "sleep 60")


@pytest.mark.parametrize(
    ("reply", "said"),
    [(broker, "a TubeMQ broker answers there"), (master_of(1), "another master answers there")],
    ids=["broker", "other-master"],
)
async def test_a_stranger_on_the_web_port_fails_the_start(
    tmp_path: Path, ports: list[int], reply: Callable[[str], Reply], said: str
) -> None:
    node = _master(tmp_path, ports)
    stranger = Answers(ports[1], reply)
    try:
        with pytest.raises(PortConflictError) as info:
            await node.start()
    finally:
        stranger.close()
    assert f"port {ports[1]}" in str(info.value)
    assert said in str(info.value)
    assert not node.running  # the stand-in was killed with the failed start


async def test_our_master_on_the_web_port_is_ready(tmp_path: Path, ports: list[int]) -> None:
    node = _master(tmp_path, ports)
    ours = Answers(ports[1], master_of(ports[2]))
    try:
        await node.start()
        assert node.running
    finally:
        ours.close()
        await node.stop(timeout=5.0)
        node.release_ports()  # held for a restart that does not come
    assert not node.running
