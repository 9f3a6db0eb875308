"""The fault suite's setting: a FakeCluster whose master and brokers sit behind FaultProxies,
plus the checks every fault test ends with (deadline kept, nothing acknowledged lost, no task
or file descriptor left behind)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tests.support.leak_checks import live_tasks, open_fds, wait_released
from tubemq_aio import TubeMQError
from tubemq_aio.testing import FakeCluster, FaultProxy
from tubemq_aio.testing._fault_proxy import Direction

T = TypeVar("T")
#: Slack on top of a call's own deadline before the suite calls it hung.
GRACE = 3.0


@dataclass
class FaultEnv:
    """A fake cluster with one proxy before the master and one before each broker."""

    cluster: FakeCluster
    master: FaultProxy
    brokers: dict[int, FaultProxy]
    acked: list[bytes] = field(default_factory=list)

    @property
    def master_addr(self) -> str:
        """Where clients find the master (through its proxy)."""
        return self.master.addr

    def all_proxies(self) -> list[FaultProxy]:
        """Every proxy."""
        return [self.master, *self.brokers.values()]

    def heal(self) -> None:
        """Remove every network fault."""
        for proxy in self.all_proxies():
            proxy.clear()

    def lost(self, topic: str) -> list[bytes]:
        """Bodies of acknowledged sends the cluster does not hold (bodies are unique; a corrupted
        answer may carry a wrong message id, so the body is what counts)."""
        stored = set(self.cluster.bodies(topic))
        return [b for b in self.acked if b not in stored]


async def bounded(call: Awaitable[T], deadline: float) -> T | TubeMQError:
    """Await ``call``; it must end by ``deadline`` (+ :data:`GRACE`) with a value or a typed
    error, which is returned. Anything else fails the test."""
    try:
        return await asyncio.wait_for(call, deadline + GRACE)
    except TimeoutError as exc:
        if isinstance(exc, TubeMQError):
            return exc
        raise AssertionError(f"a call with a {deadline} s deadline hung") from exc
    except TubeMQError as exc:
        return exc


@contextlib.asynccontextmanager
async def fault_env(
    brokers: int = 1, partitions: int = 2, max_batch: int = 64
) -> AsyncIterator[FaultEnv]:
    """Start the cluster and the proxies; at the end check that no task or fd leaked."""
    tasks_before = live_tasks()
    fds_before = open_fds()
    async with FakeCluster(
        topics={"demo": partitions}, brokers=brokers, max_batch=max_batch
    ) as cluster:
        master = FaultProxy(cluster.master_addr)
        proxies = {
            b.broker_id: FaultProxy(cluster.broker_addr(b.broker_id)) for b in cluster.brokers
        }
        await master.start()
        for broker_id, proxy in proxies.items():
            await proxy.start()
            cluster.advertise_broker(broker_id, proxy.addr)
        try:
            yield FaultEnv(cluster, master, proxies)
        finally:
            for proxy in [master, *proxies.values()]:
                await proxy.close()
    await wait_released(fds_before, tasks_before)


Fault = Callable[[FaultEnv], Awaitable[None] | None]


async def _refuse(env: FaultEnv) -> None:
    await env.brokers[1].refuse_connections()
    env.brokers[1].reset_connections()


async def _kill_broker(env: FaultEnv) -> None:
    await env.cluster.stop_broker(1)


async def _kill_master(env: FaultEnv) -> None:
    await env.cluster.stop_master()


def fault_table(
    *, bandwidth: Direction | None, bandwidth_cap: int, reset: Direction, reset_after: int
) -> dict[str, Fault]:
    """The faults both suites run: broker 1's proxy misbehaving, or a node killed.

    Args:
        bandwidth: the direction of the bandwidth cap (None: both).
        bandwidth_cap: bytes per second.
        reset: the direction whose byte count triggers the reset.
        reset_after: bytes forwarded before the reset.
    """
    return {
        "latency": lambda env: env.brokers[1].set(latency=0.05),
        "bandwidth cap": lambda env: env.brokers[1].set(
            bandwidth or "both", bandwidth=bandwidth_cap
        ),
        "broker stops reading": lambda env: env.brokers[1].set("up", stop_reading=True),
        "blackhole": lambda env: env.brokers[1].set(blackhole=True),
        f"reset after {reset_after // 1000} KB": lambda env: env.brokers[1].set(
            reset, reset_after=reset_after
        ),
        "corrupted answers": lambda env: env.brokers[1].set("down", corrupt_rate=0.3),
        "half-closed by the broker": lambda env: env.brokers[1].half_close("down"),
        "connect refused": _refuse,
        "broker killed": _kill_broker,
        "master killed": _kill_master,
    }


async def apply_fault(env: FaultEnv, fault: Fault) -> None:
    """Switch ``fault`` on."""
    applied = fault(env)
    if applied is not None:
        await applied


async def restore(env: FaultEnv, name: str) -> None:
    """Heal the network and restart whatever fault ``name`` stopped."""
    env.heal()
    if name == "connect refused":
        await env.brokers[1].start()
    if name == "broker killed":
        await env.cluster.start_broker(1)
    if name == "master killed":
        await env.cluster.start_master()
