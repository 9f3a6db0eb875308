"""What the real ``cluster up`` prints: the ports it takes, progress while it starts, and the
addresses on their own lines (the whole command runs in tests/integration/test_cluster.py)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from tubemq_aio.testing._up_report import choose_port, fake_up_lines, progress, up_lines


def test_choose_port_takes_the_usual_port_when_free_else_says_which() -> None:
    said: list[str] = []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        port = choose_port(None, taken, "master", said.append)
        assert port != taken
        assert said == [f"port {taken} is in use: the master takes port {port} instead"]
    said.clear()
    assert choose_port(None, port, "master", said.append) == port  # free now
    assert choose_port(4242, 8715, "master", said.append) == 4242  # as asked, even if taken
    assert said == []
    # 0: any free port, chosen here (LocalCluster took 0 as a fixed port and ran short of
    # ports: `cluster up --port 0` on a real cluster died with IndexError).
    anyport = choose_port(0, 8715, "master", said.append)
    assert anyport > 0
    assert said == []


class _Node:
    def __init__(self) -> None:
        self.running = False


class _Starting:
    """A LocalCluster as ``progress`` sees it while it starts."""

    def __init__(self) -> None:
        self.lib_dir = Path()
        self.brokers: list[_Node] = []


async def test_progress_says_each_phase_and_repeats_while_one_lasts() -> None:
    cluster, said = _Starting(), list[str]()
    task = asyncio.create_task(progress(cluster, said.append, every=0.6))
    try:
        await asyncio.sleep(0.1)
        assert "fetching the server jars" in said[-1]
        cluster.lib_dir, cluster.brokers = Path("lib"), [_Node(), _Node()]
        await asyncio.sleep(0.6)
        assert "starting the master" in said[-1]
        cluster.brokers[0].running = True
        await asyncio.sleep(0.6)
        count = len(said)
        assert "waiting for them and the topics to go live" in said[-1]
        await asyncio.sleep(1.2)  # the same phase again after `every`
        assert len(said) > count
        assert all(line.split()[0].endswith("s") for line in said)  # seconds since the start
    finally:
        task.cancel()


def test_up_lines_put_each_address_on_its_own_line() -> None:
    info = {
        "bring_up_seconds": 38.2,
        "master_addr": "127.0.0.1:8715",
        "master_web": "http://127.0.0.1:8080/webapi.htm",
        "log_dir": "/logs",
    }
    lines = up_lines(info, Path("state.json"))
    assert lines[0] == "TubeMQ is up in 38.2s: masters=127.0.0.1:8715"
    assert lines[1].split()[:2] == ["master:", "127.0.0.1:8715"]
    assert lines[2].split()[:3] == ["web", "API:", "127.0.0.1:8080"]
    assert lines[3].split() == ["logs:", "/logs"]
    assert lines[4].split()[:2] == ["state:", "state.json"]


def test_the_fake_says_its_address_on_its_own_line_and_that_it_has_no_web_api() -> None:
    info = {"bring_up_seconds": 0.0, "master_addr": "127.0.0.1:8715"}
    lines = fake_up_lines(info, Path("state.json"))
    assert lines[0] == "TubeMQ (FAKE) is up in 0.0s: masters=127.0.0.1:8715"
    assert lines[1].split()[:2] == ["master:", "127.0.0.1:8715"]
    assert lines[2].split()[:3] == ["web", "API:", "none"]
    assert lines[3].split()[:2] == ["state:", "state.json"]
    assert not any(line.lstrip().startswith("{") for line in lines)  # no JSON blob
