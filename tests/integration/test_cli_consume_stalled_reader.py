"""``tubemq-aio consume | reader`` where the reader stops reading: the pipe fills and the write
blocks. It blocked the command's event loop, so the consumer's heartbeats stopped and the master
dropped it from its group (its partitions went to others: their messages printed twice once the
reader came back); a signal could not end it either. Now the output is written by a thread of
its own: the member stays in its group while the pipe is full, and everything it printed comes
once the reader reads again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time

import pytest

from tests.support.cli_run import CALL_TIMEOUT, cli_argv, cli_env
from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(120)
COUNT = 3000  # about 600 KB of JSON lines: far more than a pipe holds (64 KB)
#: The master drops a member that sent no heartbeat for this long (the command beats every 1 s).
CLIENT_TIMEOUT = 3.0


async def test_a_reader_that_stops_reading_does_not_stop_the_heartbeats() -> None:
    async with FakeCluster({"src": 1}, client_timeout=CLIENT_TIMEOUT) as cluster:
        async with Producer(cluster.master_addr, topics=["src"]) as producer:
            outcomes = await producer.send_many(
                "src", [b"x%05d" % i + b"." * 90 for i in range(COUNT)]
            )
            assert all(not isinstance(o, Exception) for o in outcomes)
        master = f"tubemq://{cluster.master_addr}?heartbeat_interval=1"
        argv = cli_argv(
            "consume",
            "--master",
            master,
            "--topic",
            "src",
            "--group",
            "g_stall",
            "--from",
            "earliest",
        )
        proc = subprocess.Popen(  # noqa: ASYNC220 (started once; its pipes are read in a thread)
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env()
        )
        try:
            deadline = time.monotonic() + 30
            while not cluster.members("g_stall"):
                assert time.monotonic() < deadline, "the command never joined its group"
                await asyncio.sleep(0.05)
            # Nobody reads: the pipe fills at once, and the member must outlive two timeouts.
            await asyncio.sleep(2 * CLIENT_TIMEOUT)
            async with Producer(cluster.master_addr, topics=["src"]):
                pass  # a request to the master: it drops the members that stopped beating
            assert cluster.members("g_stall"), "the master dropped the member: no heartbeats"
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)  # once the reader reads, the command ends
            out, err = await asyncio.to_thread(proc.communicate, timeout=CALL_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        assert proc.returncode == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines, err
        bodies = [line["body"] for line in lines]
        assert len(set(bodies)) == len(bodies)  # one member all along: nothing twice


async def test_a_reader_that_goes_away_ends_the_command() -> None:
    """``consume | head -1``: once the reader closed the pipe, the next write fails and the
    command ends with 0, acking nothing it could not print."""
    async with FakeCluster({"src": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["src"]) as producer:
            await producer.send_many("src", [b"m%05d" % i for i in range(COUNT)])
        argv = cli_argv(
            "consume",
            "--master",
            cluster.master_addr,
            "--topic",
            "src",
            "--group",
            "g_head",
            "--from",
            "earliest",
        )
        proc = subprocess.Popen(  # noqa: ASYNC220 (started once; its pipes are read in a thread)
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), bufsize=0
        )
        try:
            assert proc.stdout is not None
            first = await asyncio.to_thread(proc.stdout.readline)
            assert json.loads(first)["body"] == "m00000"
            proc.stdout.close()
            assert await asyncio.to_thread(proc.wait, CALL_TIMEOUT) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
