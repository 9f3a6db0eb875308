"""The housekeeper: per-group background jobs, run by one elected replica per group.

Every replica runs one :class:`Housekeeper` task (owned by the app's lifespan). Each tick
(a third of ``leader_lease_ms``) it closes this replica's TubeMQ sessions that no client used
for ``session_idle_ms``, then, per group, takes or renews the group's leader key in Redis
(compare-and-set, ``PX`` on Redis's clock) and, while leader: probes partitions nobody leased
for ``probe_interval_ms`` (:mod:`.lag_probe`), deletes the state of broadcast clients idle for
``client_idle_ms`` and refreshes the lag gauges it exports. Every job is idempotent, so two
leaders for a moment (a stalled one whose key lapsed) do no harm; a replica that cannot renew
stops acting before its key expires (:class:`~.decisions.Leadership`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tubemq_aio.errors import ClientClosedError, TubeMQError
from tubemq_aio.gateway.config.tables import GroupSpec, HousekeeperConfig
from tubemq_aio.gateway.engine.data import FetchArgs
from tubemq_aio.gateway.engine.lag import read_lag
from tubemq_aio.gateway.housekeeper.decisions import (
    LagSample,
    Leadership,
    clients_to_collect,
    lag_samples,
    sessions_to_close,
)
from tubemq_aio.gateway.housekeeper.lag_probe import probe_partition
from tubemq_aio.gateway.leases.housekeeping_store import HousekeeperStore
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.metrics import PREFIX
from tubemq_aio.gateway.tubemq.session_table import SessionTable
from tubemq_aio.supervisor import Supervisor

__all__ = ["Housekeeper", "HousekeeperStats"]

log = logging.getLogger("tubemq_aio.gateway")


@dataclass(slots=True)
class HousekeeperStats:
    """Plain counters of one replica's housekeeper."""

    ticks: int = 0
    errors: int = 0
    leadership_changes: int = 0
    probes: int = 0
    offset_rewinds: int = 0
    clients_collected: int = 0
    sessions_closed: int = 0
    samples: dict[str, list[LagSample]] = field(default_factory=dict)


class Housekeeper:
    """One replica's housekeeper task.

    Args:
        store: the replica's lease store (the consume engine's, started before the housekeeper).
        sessions: the replica's TubeMQ sessions (the consume engine's): idle ones are closed,
            the lag probes read through them.
        groups: the groups served.
        config: the ``[housekeeper]`` settings.
        replica: this replica's name (the leader key holds it, with a random suffix).
        rpc_timeout: seconds per Redis round trip and TubeMQ RPC (the engine's).
    """

    def __init__(
        self,
        store: LeaseStore,
        sessions: SessionTable,
        groups: tuple[GroupSpec, ...],
        config: HousekeeperConfig,
        *,
        replica: str,
        rpc_timeout: float,
    ) -> None:
        self.config = config
        self.me = f"{replica}:{secrets.token_hex(4)}"
        self.stats = HousekeeperStats()
        self._lease_store = store
        self._sessions = sessions
        self._groups = groups
        self._lead = {g.name: Leadership(config.leader_lease_ms) for g in self._groups}
        self._probed: dict[str, float] = {}
        #: The owner of the election and work loops.
        self.tasks = Supervisor("tubemq-gateway-housekeeper")
        self._started = False
        self._stop = asyncio.Event()
        self._store: HousekeeperStore | None = None
        self._timeout = rpc_timeout

    def __repr__(self) -> str:
        leading = sorted(g for g, lead in self._lead.items() if lead.held_until > -math.inf)
        return f"<Housekeeper {self.me} leading={leading}>"

    @property
    def tick_s(self) -> float:
        """Seconds between two passes (a third of the leader lease)."""
        return self.config.leader_lease_ms / 3000

    def leading(self) -> list[str]:
        """Groups this replica acts as housekeeper for right now."""
        now = asyncio.get_running_loop().time()
        return sorted(g for g, lead in self._lead.items() if lead.is_leader(now))

    async def start(self) -> None:
        """Start the tasks (idempotent; a no-op when disabled or without groups).

        Raises:
            ClientClosedError: :meth:`close` was called.
        """
        if self._stop.is_set():
            raise ClientClosedError("the housekeeper is closed")
        if self._started or not self.config.enabled or not self._groups:
            return
        self._started = True
        self._store = HousekeeperStore(self._lease_store)
        self.tasks.spawn(self._loop(self.elect), "elect")
        self.tasks.spawn(self._loop(self.work), "work")

    async def close(self) -> None:
        """End the tasks and give up the leader keys this replica holds (bounded, idempotent)."""
        self._stop.set()
        running = self.tasks.tasks
        if running:  # a pass in progress may finish its round trips first
            await asyncio.wait(running, timeout=2 * self._timeout)
        stopping = self.tasks.cancel()
        if stopping:
            _, pending = await asyncio.wait(stopping, timeout=self._timeout)
            if pending:
                log.warning("housekeeper tasks did not end in time")
        held = [g for g, lead in self._lead.items() if lead.held_until > -math.inf]
        for lead in self._lead.values():
            lead.resign()
        self.stats.samples.clear()
        if self._store is not None:
            for group in held:  # let another replica take over at once, not after the lease
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self._timeout):
                        await self._store.resign(group, self.me)

    async def _loop(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` every tick until closed; a failed step is logged and counted, never
        fatal (supervised: the next one starts afresh)."""
        while not self._stop.is_set():
            try:
                async with asyncio.timeout(self.tick_s + 4 * self._timeout):
                    await step()
            except Exception as exc:
                self.stats.errors += 1
                log.warning("housekeeper %s failed: %r", getattr(step, "__name__", step), exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.tick_s):
                    await self._stop.wait()

    async def elect(self) -> None:
        """Take or renew every group's leader key (its own task: slow jobs never delay it)."""
        assert self._store is not None
        loop = asyncio.get_running_loop()
        for spec in self._groups:
            lead = self._lead[spec.name]
            sent = loop.time()
            try:
                async with asyncio.timeout(self._timeout):
                    got = await self._store.lead(spec.name, self.me, self.config.leader_lease_ms)
            except (TubeMQError, TimeoutError) as exc:  # the belief lapses on its own
                self.stats.errors += 1
                log.warning("housekeeper election of %s: %r", spec.name, exc)
                continue
            if lead.observe(got.held, sent):
                self.stats.leadership_changes += 1
                who = "this replica" if got.held else got.holder
                log.info("housekeeper of group %s: %s", spec.name, who)

    async def work(self) -> None:
        """One pass: idle sessions of this replica, then the jobs of each group it leads."""
        self.stats.ticks += 1
        await self._close_idle_sessions()
        loop = asyncio.get_running_loop()
        for spec in self._groups:
            if self._stop.is_set():
                return
            if not self._lead[spec.name].is_leader(loop.time()):
                self.stats.samples.pop(spec.name, None)  # gauges come from the leader only
                continue
            try:
                await self._group(spec)
            except (TubeMQError, TimeoutError, OSError) as exc:
                self.stats.errors += 1
                log.warning("housekeeper of group %s: %r", spec.name, exc)

    async def _close_idle_sessions(self) -> None:
        loop = asyncio.get_running_loop()
        groups, last_use, busy = self._sessions.usage()
        idle_s = self.config.session_idle_ms / 1000
        for group in sessions_to_close(groups, last_use, busy, loop.time(), idle_s):
            if await self._sessions.close_unused(group):
                self.stats.sessions_closed += 1
                log.info("closed the idle TubeMQ session of group %s", group)

    async def _group(self, spec: GroupSpec) -> None:
        loop = asyncio.get_running_loop()
        lead = self._lead[spec.name]
        if spec.mode == "broadcast":
            await self._collect_clients(spec)
        interval = self.config.probe_interval_ms
        if interval and loop.time() - self._probed.get(spec.name, -math.inf) >= interval / 1000:
            self._probed[spec.name] = loop.time()
            await self._probe(spec)
        if lead.is_leader(loop.time()):
            await self._export_lag(spec)

    async def _scopes(self, spec: GroupSpec) -> list[str]:
        if spec.mode == "clustering":
            return ["c"]
        return await self._lease_store.clients(spec.name)

    async def _probe(self, spec: GroupSpec) -> None:
        store = self._lease_store
        loop = asyncio.get_running_loop()
        began = loop.time()
        was_open = spec.name in self._sessions.usage()[0]
        tube = await self._sessions.get(spec)
        try:
            if spec.mode == "clustering":  # a group nobody fetched learns its partitions here
                await store.sync_parts(spec.name, "c", await tube.partitions())
            lease_ms = int(3000 * self._timeout)
            holder = f"housekeeper@{self.me}"
            for scope in await self._scopes(spec):
                idle = await self._require_store().idle_partitions(
                    spec.name, scope, self.config.probe_interval_ms
                )
                for p in idle:
                    if not self._lead[spec.name].is_leader(loop.time()) or self._stop.is_set():
                        return
                    try:
                        async with asyncio.timeout(2 * self._timeout):
                            probe = FetchArgs(spec, scope, lease_ms, holder)
                            got = await probe_partition(
                                store, tube, probe, p, on_rewind=self._count_rewind
                            )
                    except (TubeMQError, TimeoutError, OSError) as exc:
                        # one broker down must not stop the probes of the others
                        self.stats.errors += 1
                        log.warning("lag probe of %s in %s: %r", p, spec.name, exc)
                        continue
                    self.stats.probes += int(got)
        finally:
            _, last_use, _ = self._sessions.usage()
            unused = last_use.get(spec.name, -math.inf) < began
            if not was_open and unused and self.config.session_idle_ms:
                # opened only for this pass: an idle group does not stay registered
                await self._sessions.close_unused(spec.name)

    def _count_rewind(self) -> None:
        self.stats.offset_rewinds += 1

    def _require_store(self) -> HousekeeperStore:
        assert self._store is not None
        return self._store

    async def _collect_clients(self, spec: GroupSpec) -> None:
        idle = self.config.client_idle_ms
        if idle <= 0:
            return
        hstore = self._require_store()
        now_ms, seen = await hstore.clients(spec.name)
        for scope in clients_to_collect(seen, now_ms, idle):
            if await hstore.collect(spec.name, scope, idle) == "deleted":
                self.stats.clients_collected += 1
                log.info("deleted the state of idle broadcast client %s of %s", scope, spec.name)

    async def _export_lag(self, spec: GroupSpec) -> None:
        samples: list[LagSample] = []
        for scope in await self._scopes(spec):
            report = await read_lag(self._lease_store, spec.name, scope)
            samples += lag_samples(
                spec.name, scope, ((e.partition_key, e.lag_bytes) for e in report.partitions)
            )
        self.stats.samples[spec.name] = samples

    def collect(self) -> Iterator[Metric]:
        """Prometheus families: leadership per group; lag gauges of the groups this replica
        leads (none elsewhere, so a sum over replicas counts each partition once)."""
        now = asyncio.get_running_loop().time() if _loop_running() else math.inf
        leader = GaugeMetricFamily(
            PREFIX + "housekeeper_leader",
            "1 while this replica is the group's housekeeper",
            labels=["group"],
        )
        part = GaugeMetricFamily(
            PREFIX + "group_lag_bytes",
            "backlog of a partition in index bytes (28 per message), from the housekeeper",
            labels=["group", "scope", "partition"],
        )
        total = GaugeMetricFamily(
            PREFIX + "group_lag_total_bytes",
            "backlog of a group scope over its partitions in index bytes, from the housekeeper",
            labels=["group", "scope"],
        )
        for group, lead in sorted(self._lead.items()):
            is_leader = lead.is_leader(now)
            leader.add_metric([group], 1.0 if is_leader else 0.0)
            for s in self.stats.samples.get(group, []) if is_leader else []:
                if s.partition:
                    part.add_metric([s.group, s.scope, s.partition], float(s.lag_bytes))
                else:
                    total.add_metric([s.group, s.scope], float(s.lag_bytes))
        yield from (leader, part, total)
        for name in ("probes", "offset_rewinds", "clients_collected", "sessions_closed", "errors"):
            counter = CounterMetricFamily(
                f"{PREFIX}housekeeper_{name}", f"housekeeper {name.replace('_', ' ')}"
            )
            counter.add_metric([], float(getattr(self.stats, name)))
            yield counter


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
