"""The local TubeMQ cluster itself: Java interop smoke, broker faults, bad input."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.support.java_interop import finish_or_fail
from tubemq_aio.testing import (
    LocalCluster,
    NodeNotReadyError,
    PortInUseError,
    RuntimeResolveError,
    ToolNotFoundError,
    UnsupportedVersionError,
)
from tubemq_aio.testing._process import pid_alive

CLI = "org.apache.inlong.tubemq.server.tools.cli"
MESSAGES = 3000


async def run_tool(cluster: LocalCluster, main: str, *args: str, timeout: float = 120) -> str:
    """Run a Java tool from the server classpath and return its stdout (fails on timeout)."""
    proc = await asyncio.create_subprocess_exec(
        *cluster.java_tool_argv(main, *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await finish_or_fail(proc, timeout, main, cluster)
    return out.decode(errors="replace")


async def java_produce(cluster: LocalCluster, topic: str, count: int) -> None:
    """Send ``count`` messages with the official Java CliProducer and check all succeeded."""
    out = await run_tool(
        cluster,
        f"{CLI}.CliProducer",
        *("--master-servers", cluster.master_addr, "--topicName", topic),
        *("--messages", str(count), "--message-data-size", "256", "--num-send-threads", "1"),
        *("--client-count", "1", "--without-delay", "--sync-produce"),
    )
    done = re.search(r"Finished.*= (\d+) : (\d+) \((\d+):(\d+):(\d+)\)", out)
    assert done, out[-3000:]
    assert done.groups() == (str(count), str(count), str(count), "0", "0"), out[-3000:]


async def java_consume(cluster: LocalCluster, topic: str, group: str, count: int) -> None:
    """Consume ``count`` messages from the first offset with the official Java CliConsumer."""
    out = await run_tool(
        cluster,
        f"{CLI}.CliConsumer",
        *("--master-servers", cluster.master_addr, "--topicName", topic),
        *("--groupName", group, "--consume-position", "-1", "--num-fetch-threads", "1"),
        *("--client-count", "1", "--messages", str(count)),
    )
    done = re.search(r"Finished.*= (\d+) : (\d+)", out)
    assert done, out[-3000:]
    assert int(done.group(2)) >= count, out[-3000:]


async def test_java_cli_producer_and_consumer_roundtrip(cluster: LocalCluster, topic: str) -> None:
    """The cluster works for the reference Java client, independently of our client."""
    assert re.fullmatch(r"127\.0\.0\.1:\d+", cluster.master_addr)
    assert [b.layout.host for b in cluster.brokers] == ["127.0.0.1", "127.0.0.2"][
        : len(cluster.brokers)
    ]
    await java_produce(cluster, topic, MESSAGES)
    await java_consume(cluster, topic, f"g_{topic}", MESSAGES)


async def test_broker_kill_restart_and_stop_start(cluster: LocalCluster, topic: str) -> None:
    """SIGKILL a broker, start it again, stop it gracefully, restart: it serves traffic."""
    broker = cluster.brokers[-1]
    old_pid = broker.pid
    assert old_pid is not None
    await broker.kill()
    assert not broker.running
    assert not pid_alive(old_pid)
    t0 = time.monotonic()
    await broker.start()
    assert broker.running
    assert broker.pid != old_pid
    status = await broker.run_status()
    assert status["runStatus"] == "running", status
    await broker.restart()
    assert broker.running
    print(f"kill+start+restart of {broker.name} ready after {time.monotonic() - t0:.1f}s")
    await java_produce(cluster, topic, 1000)
    await java_consume(cluster, topic, f"g_{topic}", 1000)


async def test_create_and_delete_topic(cluster: LocalCluster) -> None:
    """create_topic waits until publishable; delete_topic removes it from the master."""
    name = f"it_del_{os.getpid()}"
    await cluster.create_topic(name, partitions=1)
    assert await cluster.topic_ready(name)
    await cluster.delete_topic(name)
    items = await cluster.web_api.call("admin_query_topic_info", topicName=name)
    assert not items or not items[0].get("topicInfo")


async def test_port_in_use_is_reported_before_anything_starts(tmp_path: Path) -> None:
    """A taken master port gives PortInUseError naming the port and a log path."""
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = LocalCluster(master_port=port, work_dir=tmp_path)
        with pytest.raises(PortInUseError, match=str(port)) as info:
            await cluster.start()
    assert info.value.log_file is not None
    assert str(info.value.log_file) in str(info.value)
    assert all(not n.running for n in cluster.nodes)


@pytest.mark.parametrize("tool", ["java", "mvn"])
async def test_missing_tool(tool: str, tmp_path: Path) -> None:
    """Missing java or mvn gives ToolNotFoundError naming the program."""
    kwargs = {tool: f"no-such-{tool}-here", "cache_dir": tmp_path / "cache"}
    cluster = LocalCluster(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ToolNotFoundError, match=f"no-such-{tool}-here"):
        await cluster.start()
    assert cluster.nodes == []


async def test_unresolvable_runtime(tmp_path: Path) -> None:
    """A runtime Maven cannot resolve fails with RuntimeResolveError naming maven.log (an
    unknown version is refused before that, when the cluster is built)."""
    with pytest.raises(UnsupportedVersionError, match=r"0\.0\.1-nonexistent"):
        LocalCluster(version="0.0.1-nonexistent", cache_dir=tmp_path)
    failing_mvn = tmp_path / "mvn"
    failing_mvn.write_text(
        "#!/bin/sh\necho 'Could not transfer artifact: network is down' >&2\nexit 1\n"
    )
    failing_mvn.chmod(0o755)
    cluster = LocalCluster(cache_dir=tmp_path / "cache", mvn=str(failing_mvn))
    t0 = time.monotonic()
    with pytest.raises(RuntimeResolveError, match=r"2\.4\.0") as info:
        await cluster.start()
    assert time.monotonic() - t0 < 300
    log = info.value.log_file
    assert log is not None
    assert log.name == "maven.log"
    assert log.exists()
    assert str(log) in str(info.value)
    assert cluster.nodes == []


async def test_broker_never_ready_times_out_and_cleans_up(tmp_path: Path) -> None:
    """A broker that is not ready in time gives NodeNotReadyError and no JVM survives."""
    cluster = LocalCluster(topics=["never_ready"], ready_timeout=3, work_dir=tmp_path)
    t0 = time.monotonic()
    with pytest.raises(NodeNotReadyError, match="broker1") as info:
        await cluster.start()
    assert time.monotonic() - t0 < 90
    assert info.value.log_file == cluster.log_dir / "broker1.log"
    assert "broker1.log (last" in str(info.value)  # log tails are attached
    pids = [n.pid for n in cluster.nodes]
    assert pids
    assert all(p is not None and not pid_alive(p) for p in pids)


async def test_cli_up_status_down(tmp_path: Path) -> None:
    """`up` leaves a detached cluster running after it exits; `status` sees it; `down` ends it."""
    env = {**os.environ, "TUBEMQ_AIO_STATE": str(tmp_path / "state.json")}
    module = ("-m", "tubemq_aio.testing.cluster")

    async def cli(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *module,
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
        assert proc.returncode is not None
        return proc.returncode, out.decode(errors="replace")

    pids: list[int] = []
    try:
        rc, out = await cli("up", "--topic", "cli_topic:2")
        assert rc == 0, out
        state = json.loads((tmp_path / "state.json").read_text())
        pids = [n["pid"] for n in state["nodes"]]
        assert "cli_topic" in state["topics"]
        assert all(pid_alive(p) for p in pids), out
        # The usual ports when free, else a line saying which were taken instead.
        master_port = int(state["master_addr"].rsplit(":", 1)[1])
        web = state["master_web"].removeprefix("http://").removesuffix("/webapi.htm")
        for port, usual in ((master_port, 8715), (int(web.rsplit(":", 1)[1]), 8080)):
            assert port == usual or f"port {usual} is in use" in out, out
        # Progress while it starts, then each address on its own line.
        assert "starting the master" in out, out
        assert "waiting for them and the topics to go live" in out, out
        lines = out.splitlines()
        assert any(line.split()[:2] == ["master:", state["master_addr"]] for line in lines), out
        assert any(line.split()[:3] == ["web", "API:", web] for line in lines), out
        # `topics` finds the web API in the state file: no --web needed.
        topics = await asyncio.create_subprocess_exec(
            sys.executable,
            *shlex.split("-m tubemq_aio topics --format json"),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        listed, err = await asyncio.wait_for(topics.communicate(), 60)
        assert topics.returncode == 0, err
        assert [t["topic"] for t in json.loads(listed)] == ["cli_topic"]
        rc, out = await cli("status")
        assert rc == 0, out
        assert state["master_addr"] in out, out
    finally:
        rc, out = await cli("down")
    assert rc == 0, out
    assert not any(pid_alive(p) for p in pids)
    assert not (tmp_path / "state.json").exists()
