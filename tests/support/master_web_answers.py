"""Stand-ins for the tests of a local cluster's master node without Java: a loopback web API
(``Answers``, with the replies a broker or a master gives) and a master node whose "JVM" is a
shell command (``stand_in_master``)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tubemq_aio.testing._config import MasterLayout
from tubemq_aio.testing._nodes import JvmLaunch, MasterNode
from tubemq_aio.testing._webapi import MasterWebApi

__all__ = ["VERSION", "Answers", "Reply", "broker", "master_of", "stand_in_master"]

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


def stand_in_master(tmp_path: Path, ports: list[int], command: str) -> MasterNode:
    """A master node on ``ports`` (RPC, web, replication) whose "JVM" runs the shell
    ``command`` (its arguments ignored)."""
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\nexec {command}\n", encoding="ascii")
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
