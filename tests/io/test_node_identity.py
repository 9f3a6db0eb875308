"""A master's start fails when another node answers on its web port (the CI failure, rebuilt).

The "JVM" is a stand-in that only sleeps (so the master's own web API never comes up), and a
loopback HTTP server on the master's web port answers in its place, with the replies a TubeMQ
broker or another cluster's master gives. Before the identity check, the readiness call
(``admin_query_server_version``, which brokers answer too) passed against a broker, and the
start went on until ``admin_add_broker_configure`` was refused with "Unsupported method".
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tubemq_aio.testing import PortConflictError
from tubemq_aio.testing._config import MasterLayout
from tubemq_aio.testing._nodes import JvmLaunch, MasterNode
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._webapi import MasterWebApi

Reply = dict[str, Any]
VERSION: Reply = {"result": True, "errCode": 0, "errMsg": "Ok", "data": [{"version": "1.2.0"}]}


def broker(method: str) -> Reply:
    """A broker's web API: it knows the version call, and refuses a master's method."""
    if method == "admin_query_server_version":
        return VERSION
    return {"result": False, "errCode": 400, "errMsg": f"Unsupported method {method}"}


def master_of(port: int) -> Callable[[str], Reply]:
    """A master's web API whose group lists one node on ``port``."""
    node = {"index": 1, "name": "tubemqAioNode1", "hostName": "127.0.0.1", "port": str(port)}
    group = {"result": True, "errCode": 0, "errMsg": "Ok", "groupName": "g", "data": [node]}
    return lambda method: group if method == "admin_query_master_group_info" else VERSION


class Answers:
    """A web API on loopback answering each call with ``replies(method)``."""

    def __init__(self, port: int, replies: Callable[[str], Reply]) -> None:
        """Serve on ``port`` from a thread."""

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                method = urllib.parse.parse_qs(form.decode())["method"][0]
                body = json.dumps(replies(method)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def ports() -> Iterator[list[int]]:
    """RPC, web and replication ports of the master, reserved for the test."""
    lease = PortLease()
    yield lease.take(3)
    lease.release()


def _master(tmp_path: Path, ports: list[int]) -> MasterNode:
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\nexec sleep 60\n", encoding="ascii")
    java.chmod(0o755)
    home = tmp_path / "master"
    home.mkdir()
    (home / "master.ini").write_text("", encoding="ascii")
    rpc, web, ha = ports
    layout = MasterLayout("127.0.0.1", rpc, web, ha, 0, 0, home)
    log_dir = tmp_path / "logs"
    launch = JvmLaunch(str(java), "", log_dir, tmp_path / "log4j2.xml", detached=False)
    api = MasterWebApi("127.0.0.1", web, "token", log_dir / "master.log")
    node = MasterNode(layout, api, launch, heap=[])
    node.start_timeout = 20.0
    return node


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
    assert not node.running
