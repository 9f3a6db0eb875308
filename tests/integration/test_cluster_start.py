"""Starting the local TubeMQ cluster: start-up errors (a taken port, missing ``java``/``mvn``, an
unresolvable runtime, a broker never ready) and the ``up``/``status``/``down`` CLI. Each test
starts nodes of its own or none, never the shared test cluster, so this file runs beside the
cluster groups (``tests/xdist_groups.py``); the shared cluster's own tests are in
``test_cluster.py``."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

from tubemq_aio.testing import (
    LocalCluster,
    NodeNotReadyError,
    PortInUseError,
    RuntimeResolveError,
    ToolNotFoundError,
    UnsupportedVersionError,
)
from tubemq_aio.testing._process import pid_alive


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


async def test_two_starts_at_once_start_one_cluster_and_a_stop_during_a_start_ends_it(
    tmp_path: Path,
) -> None:
    """The second of two starts made a second set of JVMs and lost the first (left running);
    a stop during the start stopped the nodes started so far and left the ones started after."""
    cluster = LocalCluster(topics=["twice"], work_dir=tmp_path / "a")
    await asyncio.gather(cluster.start(), cluster.start())
    try:
        pids = [n.pid for n in cluster.nodes]
        assert len(pids) == 2
        assert all(p is not None and pid_alive(p) for p in pids)
        await cluster.start()  # running: nothing to do
        assert [n.pid for n in cluster.nodes] == pids
    finally:
        await cluster.stop()
    assert not any(p is not None and pid_alive(p) for p in pids)
    cluster = LocalCluster(topics=["twice"], work_dir=tmp_path / "b")
    starting = asyncio.ensure_future(cluster.start())
    await asyncio.sleep(2.0)  # the master is starting
    await cluster.stop()
    await starting
    pids = [n.pid for n in cluster.nodes]
    assert pids
    assert not any(p is not None and pid_alive(p) for p in pids)


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
