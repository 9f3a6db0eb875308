"""A Redis Cluster on loopback: three primaries with one replica each.

:class:`RedisClusterSet` starts six ``redis-server --cluster-enabled yes`` processes (each a
:class:`~tubemq_aio.testing.RedisServer`, AOF ``appendfsync always``), joins them with
``redis-cli --cluster create … --cluster-replicas 1`` and waits until every node reports
``cluster_state:ok``. A short ``cluster-node-timeout`` makes a failover take seconds:
:meth:`~RedisClusterSet.kill_primary_of` SIGKILLs the primary serving a key's slot and
:meth:`~RedisClusterSet.wait_failover` waits until its replica serves the slot.
:attr:`~RedisClusterSet.url` is the ``redis+cluster://`` URL the gateway reads.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from tubemq_aio.testing._errors import ToolNotFoundError
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._process import option_args
from tubemq_aio.testing._redis_nodes import RedisNodeSet, info_fields, query
from tubemq_aio.testing._resp import HOST
from tubemq_aio.testing.redis import RedisServer, RedisServerError

__all__ = ["RedisClusterSet"]

PRIMARIES = 3


class RedisClusterSet(RedisNodeSet):
    """Three primaries and three replicas in one Redis Cluster (see the module docstring).

    Args:
        node_timeout_ms: ``cluster-node-timeout``: how long a silent primary takes to be failed.
        start_timeout: seconds the whole cluster may take to report ``cluster_state:ok``.
        binary: the ``redis-server`` program (``redis-cli`` is found beside it on ``PATH``).
        cli: the ``redis-cli`` program.
        data_dir: parent directory (temporary if None; kept when the ``async with`` body failed).

    Example::

        async with RedisClusterSet() as cluster:
            old = await cluster.kill_primary_of("tgw:{g:orders}:cfg")
            await cluster.wait_failover("tgw:{g:orders}:cfg", old)
    """

    def __init__(
        self,
        *,
        node_timeout_ms: int = 1000,
        start_timeout: float = 60.0,
        binary: str = "redis-server",
        cli: str = "redis-cli",
        data_dir: Path | None = None,
    ) -> None:
        """Store the settings; nothing is started yet."""
        super().__init__(binary=binary, start_timeout=start_timeout, data_dir=data_dir)
        if not 100 <= node_timeout_ms <= 600_000:
            raise ValueError("node_timeout_ms must be within 100 .. 600000")
        self.node_timeout_ms = node_timeout_ms
        self.cli = cli
        self.servers: list[RedisServer] = []
        self._lease = PortLease()

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:<p1>,…`` naming the first three nodes as seeds."""
        if not self.servers:
            raise RedisServerError("the Redis cluster was never started")
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.servers[:PRIMARIES])
        return f"redis+cluster://{hosts}"

    async def start(self) -> None:
        """Start six nodes, create the cluster and wait until every node says it is ok.

        Nothing when it runs; a start while another is under way waits for it.

        Raises:
            ToolNotFoundError: ``redis-server`` or ``redis-cli`` is not installed.
            RedisServerError: a node exited, ``--cluster create`` failed, or the cluster was
                not ok within ``start_timeout`` (with the relevant log's tail).
        """
        async with self._lifecycle_lock():
            if not self.servers:
                await self._start()

    async def _start(self) -> None:
        root = self._prepare()
        if shutil.which(self.cli) is None:
            raise ToolNotFoundError(f"{self.cli!r} not found on PATH (part of redis-tools)")
        # Redis puts the cluster bus at port + 10000 unless told: a free port of its own instead
        bus_ports = self._lease.take(2 * PRIMARIES)
        for i, bus_port in enumerate(bus_ports):
            options = {
                "--cluster-enabled": "yes",
                "--cluster-config-file": "nodes.conf",
                "--cluster-node-timeout": str(self.node_timeout_ms),
                "--cluster-port": str(bus_port),
                # a replica may always take over (the default refuses one that lost its link
                # long ago), and a new replica syncs at once, not after 5 s
                "--cluster-replica-validity-factor": "0",
                "--repl-diskless-sync-delay": "0",
            }
            server = RedisServer(
                binary=self.binary, data_dir=root / f"node-{i}", extra_args=option_args(options)
            )
            self.servers.append(server)
            await server.start()
        await self._create(root)
        for server in self.servers:
            await self._poll(
                f"cluster_state:ok on node {server.port}",
                lambda port=server.port: self._node_ok(port),  # type: ignore[misc]
                self.start_timeout,
                server.log_file,
            )
            await self._poll(
                f"the replication link of node {server.port}",
                lambda port=server.port: self._synced(port),  # type: ignore[misc]
                self.start_timeout,
                server.log_file,
            )

    async def _synced(self, port: int) -> bool:
        """A primary, or a replica whose link to its primary is up."""
        fields = info_fields(await query(port, "INFO", "replication"))
        return fields.get("role") == "master" or fields.get("master_link_status") == "up"

    async def _create(self, root: Path) -> None:
        out_file = root / "cluster-create.log"
        nodes = [f"{HOST}:{s.port}" for s in self.servers]
        argv = [self.cli, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"]
        with out_file.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out
            )
            try:
                async with asyncio.timeout(self.start_timeout):
                    code = await proc.wait()
            except BaseException:
                proc.kill()
                await proc.wait()
                raise
        if code != 0:
            text = out_file.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RedisServerError(f"redis-cli --cluster create exited {code}", out_file, text)

    async def _node_ok(self, port: int) -> bool:
        return info_fields(await query(port, "CLUSTER", "INFO")).get("cluster_state") == "ok"

    # ---- slots, roles and a failover ---------------------------------------------------------

    async def slot_of(self, key: str) -> int:
        """The hash slot of ``key`` (asked of a running node)."""
        for server in self.servers:
            if server.running:
                got = await query(server.port, "CLUSTER", "KEYSLOT", key)
                if isinstance(got, int):
                    return got
        raise RedisServerError("no running node of the cluster answers")

    async def owner_of(self, key: str) -> RedisServer:
        """The running primary that serves ``key``'s slot, as the running nodes see it.

        Raises:
            RedisServerError: no running primary serves the slot right now.
        """
        slot = await self.slot_of(key)
        for server in self.servers:
            if not server.running:
                continue
            role = await query(server.port, "ROLE")
            if not (isinstance(role, list) and role and role[0] == "master"):
                continue
            ranges = await query(server.port, "CLUSTER", "SLOTS")
            for entry in ranges if isinstance(ranges, list) else []:
                if not isinstance(entry, list) or len(entry) < 3:
                    continue
                low, high, first = entry[0], entry[1], entry[2]
                port = first[1] if isinstance(first, list) and len(first) > 1 else None
                in_range = isinstance(low, int) and isinstance(high, int) and low <= slot <= high
                if in_range and port == server.port:
                    return server
        raise RedisServerError(f"no running primary serves slot {slot}")

    async def primaries(self) -> list[RedisServer]:
        """The running nodes whose ``ROLE`` is master."""
        out = []
        for server in self.servers:
            if server.running:
                role = await query(server.port, "ROLE")
                if isinstance(role, list) and role and role[0] == "master":
                    out.append(server)
        return out

    async def kill_primary_of(self, key: str) -> RedisServer:
        """SIGKILL the primary serving ``key``'s slot (a crash) and return it."""
        server = await self.owner_of(key)
        await server.kill()
        return server

    async def wait_failover(self, key: str, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Wait until another primary than ``old`` serves ``key``'s slot and every running node
        reports ``cluster_state:ok``; return the new owner.

        Raises:
            RedisServerError: the failover did not end within ``timeout`` seconds (a
                check still running then is cut short; a cancel ends the wait at once).
            ConfigError: ``timeout`` is not a finite number of seconds > 0.
        """

        async def moved() -> bool:
            try:
                owner = await self.owner_of(key)
            except RedisServerError:
                return False
            if owner is old:
                return False
            for server in self.servers:
                if server.running and not await self._node_ok(server.port):
                    return False
            return True

        await self._poll("the cluster's failover", moved, timeout, old.log_file)
        return await self.owner_of(key)

    async def stop(self) -> None:
        """Stop every node, release the ports' reservations and remove a temporary directory.
        Idempotent; waits for a start under way."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        servers, self.servers = self.servers, []
        for server in servers:
            await server.stop()
        self._lease.release()
        self._remove_dir()

    def __repr__(self) -> str:
        """Show the nodes' ports."""
        return f"<RedisClusterSet nodes={[s._port for s in self.servers]}>"
