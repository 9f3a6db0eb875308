"""``tubemq-gateway dev --masters ADDR``: the development gateway on a cluster it does not own
(here a FakeCluster of the test's), which it leaves running when it stops."""

from __future__ import annotations

import asyncio
import shlex
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_dev import ROOT, dev_env
from tests.support.web_port_server import web_port
from tubemq_aio import Producer
from tubemq_aio.gateway.tubemq.web_port import WEB_PORT_HINT
from tubemq_aio.testing import FakeCluster

#: Runs `tubemq-gateway dev` as a process: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system


async def test_dev_on_given_masters(tmp_path: Path) -> None:
    async with FakeCluster(topics={"orders": 2}) as cluster:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *shlex.split("-m tubemq_aio.gateway dev --masters"),
            cluster.master_addr,
            *shlex.split("--topic orders --group order-readers"),
            cwd=ROOT,
            env=dev_env(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        async with asyncio.timeout(60):
            while not lines or not lines[-1].startswith("http://127.0.0.1:"):
                line = (await proc.stdout.readline()).decode()
                assert line, "\n".join(lines)
                lines.append(line.strip())
        assert f"cluster: the TubeMQ masters {cluster.master_addr}" in lines
        key = next(x for x in lines if x.startswith("admin key")).rsplit(" ", 1)[1]
        auth = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=lines[-1], headers=auth, timeout=30) as http:
            r = await http.post("/v1/topics/orders/messages", json={"value": "o1"})
            assert r.status_code == 200, r.text
            r = await http.post("/v1/groups/order-readers/fetch", json={"wait_ms": 5000})
            assert [m["value"] for m in r.json()["messages"]] == ["o1"]
        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.communicate(), 30))[0].decode()
        assert proc.returncode == 0, rest
        async with Producer(cluster.master_addr, topics=["orders"]) as producer:
            await producer.send("orders", b"still up")  # the cluster was not the dev's to stop


async def test_dev_on_masters_that_do_not_answer_ends_with_one_clear_line(tmp_path: Path) -> None:
    """uvicorn's answer to the failed start-up (``sys.exit(3)`` in its serving task) escaped
    the event loop: "Task exception was never retrieved", exit 3, no line of the dev's own."""
    with socket.socket() as unused:  # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{unused.getsockname()[1]}"
    returncode, out, text = await dev_that_fails(tmp_path, "--masters", dead)
    assert returncode == 1, text
    assert "never retrieved" not in text
    assert "SystemExit" not in text
    assert (
        text.rstrip().splitlines()[-1].startswith("tubemq-gateway dev: the gateway did not start")
    )
    assert "admin key (shown once)" not in out


async def test_dev_on_a_masters_web_port_says_so_on_its_last_line(tmp_path: Path) -> None:
    """Given the master's web port (HTTP) by mistake, dev ended with "the gateway did not start
    (see the log above)" under a traceback; its last line now says what to fix. ``--master``
    is the SDK CLI's spelling of ``--masters``."""
    async with web_port() as master:
        returncode, out, text = await dev_that_fails(tmp_path, "--master", master)
    assert returncode == 1, text
    assert f"cluster: the TubeMQ masters {master}" in out
    assert text.rstrip().splitlines()[-1] == (
        f"tubemq-gateway dev: the gateway did not start: {WEB_PORT_HINT}"
    )


async def dev_that_fails(tmp_path: Path, option: str, masters: str) -> tuple[int | None, str, str]:
    """Run ``tubemq-gateway dev --port 0 OPTION MASTERS`` to its end (60 s at most): its exit
    code, its standard output and its standard error."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *shlex.split("-m tubemq_aio.gateway dev --port 0"),
        option,
        masters,
        cwd=ROOT,
        env=dev_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()
