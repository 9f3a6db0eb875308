"""The faults of a chaos run, each an async step against a running :class:`LocalCluster`.

Every event returns an :class:`EventRecord`: when the fault began, when it was over (the last
server back or the network healed), and which broker, if any, was killed with SIGKILL (its
acknowledged-but-unflushed messages are counted apart).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tubemq_aio.testing import FaultProxy, LocalCluster

__all__ = ["EVENTS", "EventRecord", "EventSettings"]


@dataclass(frozen=True)
class EventSettings:
    """How long faults last.

    Attributes:
        freeze_seconds: How long a broker stays stopped with SIGSTOP (must exceed the clients'
            ``rpc_timeout``).
        cut_seconds: How long the network to one broker stays cut.
        server_timeout: Seconds allowed for a server to come back and be ready.
    """

    freeze_seconds: float = 15.0
    cut_seconds: float = 15.0
    server_timeout: float = 180.0


@dataclass
class EventRecord:
    """What one event did.

    Attributes:
        name: Event name.
        began: Monotonic time the fault began.
        healed: Monotonic time the fault was over (servers back and ready, network healed).
        sigkilled: ``(broker id, monotonic time)`` of every broker killed with SIGKILL.
        notes: Facts observed while injecting (e.g. which master took over).
    """

    name: str
    began: float = 0.0
    healed: float = 0.0
    sigkilled: list[tuple[int, float]] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)


async def master_sigkill(
    cluster: LocalCluster, proxy: FaultProxy, s: EventSettings, rec: EventRecord
) -> None:
    """SIGKILL the active master; a standby takes over; the killed one rejoins as a standby."""
    old = await cluster.active_master()
    rec.began = time.monotonic()
    await old.kill()
    new = await cluster.active_master(s.server_timeout)
    rec.notes.update(
        killed=old.name, took_over=new.name, takeover_s=round(time.monotonic() - rec.began, 2)
    )
    await old.start()
    await cluster.wait_ready(s.server_timeout)
    rec.healed = time.monotonic()


async def rolling_restart(
    cluster: LocalCluster, proxy: FaultProxy, s: EventSettings, rec: EventRecord
) -> None:
    """Restart every broker one at a time: SIGTERM for all but the last, SIGKILL for it."""
    rec.began = time.monotonic()
    for idx, broker in enumerate(cluster.brokers):
        if idx == len(cluster.brokers) - 1:
            rec.sigkilled.append((broker.broker_id, time.monotonic()))
            await broker.kill()
        else:
            await broker.stop()
        await broker.start()
        await cluster.wait_ready(s.server_timeout)
    rec.healed = time.monotonic()


async def broker_freeze(
    cluster: LocalCluster, proxy: FaultProxy, s: EventSettings, rec: EventRecord
) -> None:
    """Freeze broker 2 with SIGSTOP for ``freeze_seconds``, then SIGCONT it."""
    broker = cluster.brokers[min(1, len(cluster.brokers) - 1)]
    pid = broker.pid
    assert pid is not None
    rec.began = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(s.freeze_seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    await cluster.wait_ready(s.server_timeout)
    rec.notes["broker"] = broker.name
    rec.healed = time.monotonic()


async def network_cut(
    cluster: LocalCluster, proxy: FaultProxy, s: EventSettings, rec: EventRecord
) -> None:
    """Cut the network between the clients and the last broker (every byte dropped, both ways,
    on open and new connections) for ``cut_seconds``, then heal it."""
    rec.began = time.monotonic()
    proxy.set("both", blackhole=True)
    try:
        await asyncio.sleep(s.cut_seconds)
    finally:
        proxy.clear()
    rec.notes["broker"] = cluster.brokers[-1].name
    rec.healed = time.monotonic()


async def all_brokers_restart(
    cluster: LocalCluster, proxy: FaultProxy, s: EventSettings, rec: EventRecord
) -> None:
    """Stop every broker at once (SIGTERM), then start them all again."""
    rec.began = time.monotonic()
    await asyncio.gather(*(b.stop() for b in cluster.brokers))
    await asyncio.gather(*(b.start() for b in cluster.brokers))
    await cluster.wait_ready(s.server_timeout)
    rec.healed = time.monotonic()


Event = Callable[[LocalCluster, FaultProxy, EventSettings, EventRecord], Awaitable[None]]

#: Every event by name, in the order of a full run.
EVENTS: dict[str, Event] = {
    "master_sigkill": master_sigkill,
    "rolling_restart": rolling_restart,
    "broker_freeze": broker_freeze,
    "network_cut": network_cut,
    "all_brokers_restart": all_brokers_restart,
}
