"""What ``cluster up`` tells the person waiting for it: which ports the real one takes, progress
lines while its JVMs start, and the addresses on their own lines at the end (the fake's too)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from tubemq_aio.testing._ports import allocate_ports, is_port_free

__all__ = [
    "PROGRESS_EVERY",
    "choose_port",
    "fake_up_lines",
    "progress",
    "up_lines",
]

#: Seconds between two progress lines while a phase lasts.
PROGRESS_EVERY = 10.0


def choose_port(asked: int | None, default: int, what: str, say: Callable[[str], None]) -> int:
    """The port to give the cluster: ``asked`` as given (0: any free one); else ``default`` when
    it is free, else a free one, said in one line (``say``).

    Args:
        asked: The ``--port``/``--web-port`` value, or None.
        default: The usual port (8715 for the master, :data:`~tubemq_aio.admin.DEFAULT_WEB_PORT`).
        what: What listens there, for the line (``"master"``, ``"web API"``).
        say: Prints a line.
    """
    if asked == 0:  # a real port: LocalCluster counts any fixed port as taken from its own
        (port,) = allocate_ports(1)
        return port
    if asked is not None:
        return asked
    if is_port_free(default):
        return default
    (port,) = allocate_ports(1)
    say(f"port {default} is in use: the {what} takes port {port} instead")
    return port


class _Node(Protocol):
    @property
    def running(self) -> bool: ...


class _Cluster(Protocol):
    """What :func:`progress` reads of a starting :class:`LocalCluster`."""

    lib_dir: Path

    brokers: list[Any]


def _phase(cluster: _Cluster) -> str:
    # The brokers are spawned once the master answers and has them registered.
    if cluster.lib_dir == Path():
        return "fetching the server jars (Maven; the first run downloads them)"
    brokers: list[_Node] = cluster.brokers
    if not any(b.running for b in brokers):
        return "starting the master"
    return "brokers started; waiting for them and the topics to go live (the master's ~30 s step)"


async def progress(
    cluster: _Cluster, say: Callable[[str], None], every: float = PROGRESS_EVERY
) -> None:
    """Say each phase of ``cluster.start()`` as it begins, and every ``every`` seconds while it
    lasts, with the seconds since the start; runs until cancelled."""
    began = time.monotonic()
    last, said_at = "", 0.0
    while True:
        phase, now = _phase(cluster), time.monotonic()
        if phase != last or now - said_at >= every:
            say(f"  {now - began:5.1f}s  {phase}")
            last, said_at = phase, now
        await asyncio.sleep(0.5)


def up_lines(info: dict[str, Any], state: Path) -> list[str]:
    """The closing lines of ``up``: one address per line (a client's ``masters``, the web API
    that ``topics``/``groups`` ask), the logs and the state file."""
    web = str(info.get("master_web", "")).removeprefix("http://").removesuffix("/webapi.htm")
    framing = info.get("framing", "standard")
    lines = [
        f"TubeMQ is up in {info['bring_up_seconds']}s: masters={info['master_addr']}",
        _master_line(info),
        f"  web API:  {web}      (tubemq-aio topics / groups find it in the state file)",
        f"  logs:     {info['log_dir']}",
        _state_line(state),
    ]
    if framing != "standard":  # servers 1.1.0 and 1.2.0
        lines.insert(
            1,
            f"  server:   {info.get('version')}: clients need framing={framing!r}",
        )
    return lines


def fake_up_lines(info: dict[str, Any], state: Path) -> list[str]:
    """The closing lines of ``up --fake``, laid out as :func:`up_lines`: the master address on a
    line of its own, and that there is no web API (``topics``/``groups`` need a real master)."""
    return [
        f"TubeMQ (FAKE) is up in {info['bring_up_seconds']}s: masters={info['master_addr']}",
        _master_line(info),
        "  web API:  none      (the fake has none: tubemq-aio topics / groups need a real cluster)",
        _state_line(state),
    ]


def _master_line(info: dict[str, Any]) -> str:
    master = info["master_addr"]
    return f"  master:   {master}      (export TUBEMQ_AIO_MASTER={master})"


def _state_line(state: Path) -> str:
    return f"  state:    {state}      (tubemq-aio cluster status / down)"
