"""LocalCluster begins its start again on fresh ports when it lost a port race, within
``start_timeout`` (a deadline, not a count of attempts), and only for that error.

No JVM starts: the node start is replaced by one that lays the nodes out for real (ports taken
and reserved, files written) and then fails or succeeds as the test says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tubemq_aio.testing import ClusterStartError, LocalCluster, PortConflictError
from tubemq_aio.testing import _cluster as cluster_module
from tubemq_aio.testing._ports import reserved_ports


class Attempts:
    """A stand-in for ``LocalCluster._start_nodes``: ``outcome(n)`` decides attempt ``n``."""

    def __init__(self, outcome: Callable[[int], Exception | None], pause: float = 0.0) -> None:
        """Record each attempt's ports."""
        self.outcome = outcome
        self.pause = pause
        self.ports: list[set[int]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """Replace the tools, the runtime and the node start of every LocalCluster."""
        attempts = self

        async def runtime(*args: object, **kwargs: object) -> Path:
            return tmp_path / "lib"

        async def start_nodes(cluster: LocalCluster, java: str) -> None:
            cluster._build_nodes(java)
            attempts.ports.append(set(cluster._lease.ports))
            (cluster.log_dir / "master.log").write_text(f"attempt {len(attempts.ports)}\n")
            await asyncio.sleep(attempts.pause)
            error = attempts.outcome(len(attempts.ports))
            if error is not None:
                raise error

        monkeypatch.setattr(cluster_module, "find_tool", lambda *args: "java")
        monkeypatch.setattr(cluster_module, "resolve_runtime", runtime)
        monkeypatch.setattr(LocalCluster, "_start_nodes", start_nodes)


def _conflict(n: int) -> Exception:
    return PortConflictError(f"port {n}: a TubeMQ broker answers there")


async def test_a_lost_port_race_is_retried_on_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = Attempts(lambda n: _conflict(n) if n == 1 else None)
    attempts.install(monkeypatch, tmp_path)
    cluster = LocalCluster(work_dir=tmp_path / "c")
    await cluster.start()
    try:
        first, second = attempts.ports
        assert not reserved_ports() & first  # the lost attempt's ports went back
        assert reserved_ports() >= second
        assert not first & second
        kept = tmp_path / "c" / "logs-attempt1" / "master.log"
        assert kept.read_text() == "attempt 1\n"  # the lost attempt's logs are set aside
        assert (cluster.log_dir / "master.log").read_text() == "attempt 2\n"
        assert cluster.masters[0].layout.web_port in second
    finally:
        await cluster.stop()
    assert not reserved_ports() & second


async def test_the_retries_end_at_start_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = Attempts(_conflict, pause=0.1)
    attempts.install(monkeypatch, tmp_path)
    cluster = LocalCluster(work_dir=tmp_path / "c", start_timeout=0.35)
    with pytest.raises(PortConflictError, match="a TubeMQ broker answers there"):
        await cluster.start()
    assert 2 <= len(attempts.ports) <= 5
    assert not reserved_ports() & set().union(*attempts.ports)


async def test_other_start_errors_are_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = Attempts(lambda n: ClusterStartError("master exited during start-up"))
    attempts.install(monkeypatch, tmp_path)
    cluster = LocalCluster(work_dir=tmp_path / "c")
    with pytest.raises(ClusterStartError, match="master exited"):
        await cluster.start()
    assert len(attempts.ports) == 1
    assert not reserved_ports() & attempts.ports[0]
