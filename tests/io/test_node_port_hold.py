"""A local cluster's node keeps its ports bound between a stop (or kill) and its next start.

The node is a JVM that binds its ports itself, seconds after it is started; while it was down
the ports were free, so the kernel could give one to another socket (a port-0 bind or an
outgoing connection, when the reserved ports lie in the ephemeral range) and the restart failed
with "address in use". Now the node holds them (bound, not listening: connects are refused)
until right before it starts the JVM again. The "JVM" here is a stand-in that binds the RPC port
without ``SO_REUSEADDR``: it fails while anything else still holds the port, so a start that
succeeds shows the hold was let go first; a loopback HTTP server answers as the master's web API.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.master_web_answers import Answers, master_of, stand_in_master
from tests.support.port_probes import another_socket_on
from tubemq_aio.testing._nodes import MasterNode
from tubemq_aio.testing._ports import PortLease

pytestmark = pytest.mark.timeout(60)

STAND_IN = """import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", {port}))
s.listen()
time.sleep(60)
"""


def _master(tmp_path: Path, ports: list[int]) -> MasterNode:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN.format(port=ports[0]), encoding="ascii")
    return stand_in_master(tmp_path, ports, f'"{sys.executable}" "{script}"')


@pytest.mark.parametrize("down", ["stop", "kill"])
async def test_a_node_holds_its_ports_while_down_and_lets_them_go_to_start(
    tmp_path: Path, down: str
) -> None:
    lease = PortLease()  # RPC, web and replication ports, reserved for the test
    rpc, web, ha = ports = lease.take(3)
    node = _master(tmp_path, ports)
    web_api = Answers(web, master_of(ha))
    try:
        await node.start()
        assert node.held_ports == ()
        await (node.stop(timeout=5.0) if down == "stop" else node.kill())
        assert not node.running
        assert set(node.held_ports) == {rpc, ha}  # the web port is our stand-in's, still open
        with another_socket_on(rpc, "0.0.0.0") as taken:
            assert not taken  # the kernel cannot give it away while the node is down
        await node.start()  # the stand-in binds the port without SO_REUSEADDR: released first
        assert node.running
        assert node.held_ports == ()
    finally:
        web_api.close()
        await node.stop(timeout=5.0)
        node.release_ports()
        lease.release()
    assert node.held_ports == ()
    with another_socket_on(rpc, "0.0.0.0") as taken:
        assert taken  # let go for good
