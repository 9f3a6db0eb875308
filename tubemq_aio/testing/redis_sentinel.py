"""A replicated Redis with Sentinel on loopback: a primary, a replica and three sentinels.

:class:`RedisSentinelSet` runs Debian's ``redis-server`` five times: the primary and its replica
(each a :class:`~tubemq_aio.testing.RedisServer`, AOF ``appendfsync always``) and three
``redis-server --sentinel`` processes watching them with a quorum of two. Short
``down-after-milliseconds`` and ``failover-timeout`` make a failover take a few seconds:
:meth:`~RedisSentinelSet.kill_primary` SIGKILLs the primary and
:meth:`~RedisSentinelSet.wait_failover` waits until the sentinels promoted the replica.
:attr:`~RedisSentinelSet.url` is the ``redis+sentinel://`` URL the gateway reads.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlencode

from tubemq_aio.testing._fault_proxy import FaultProxy
from tubemq_aio.testing._ports import PortLease
from tubemq_aio.testing._process import JavaProcess
from tubemq_aio.testing._redis_nodes import RedisNodeSet, info_fields, query
from tubemq_aio.testing._redis_tls import client_context, client_url_options, tls_directives
from tubemq_aio.testing._resp import HOST, Reply
from tubemq_aio.testing._tls import TlsMaterial
from tubemq_aio.testing.redis import RedisServer, RedisServerError, check_password

__all__ = ["RedisSentinelSet"]

SENTINELS = 3
QUORUM = 2


class RedisSentinelSet(RedisNodeSet):
    """A primary, a replica and three sentinels (see the module docstring).

    The constructor takes keyword configuration like the SDK's clients (the public
    convention): every keyword has a default, and a test names only what it changes.

    Args:
        master_name: the name the sentinels monitor the primary under.
        down_after_ms: how long a primary must not answer before a sentinel calls it down.
        failover_timeout_ms: the sentinels' ``failover-timeout`` (also spaces retries).
        start_timeout: seconds the whole set may take to be ready (sentinels know each other).
        binary: the ``redis-server`` program.
        data_dir: parent directory (temporary if None; kept when the ``async with`` body failed).
        replication_proxy: put a :class:`~tubemq_aio.testing.FaultProxy` between the replica
            and the primary (:attr:`replication_link`), so a test can hold writes back from the
            replica (``set("down", blackhole=True)``) and make a failover lose them.
        password: the data nodes require it (``requirepass``, ``masterauth``; the sentinels
            use it towards them); None for none.
        sentinel_password: the sentinels require it of their clients; None for none.
        tls: every process listens with TLS only and replicates over it, with this material
            (:func:`~tubemq_aio.testing.make_tls_material`; clients show its pair too); None
            for plain TCP.

    Example::

        async with RedisSentinelSet() as redis:
            old = await redis.kill_primary()
            await redis.wait_failover(old)
    """

    def __init__(
        self,
        *,
        master_name: str = "mymaster",
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        start_timeout: float = 60.0,
        binary: str = "redis-server",
        data_dir: Path | None = None,
        replication_proxy: bool = False,
        password: str | None = None,
        sentinel_password: str | None = None,
        tls: TlsMaterial | None = None,
    ) -> None:
        """Store the settings; nothing is started yet."""
        super().__init__(binary=binary, start_timeout=start_timeout, data_dir=data_dir)
        if not master_name or not master_name.replace("-", "").replace("_", "").isalnum():
            raise ValueError("master_name must be letters, digits, '-' or '_'")
        if not 100 <= down_after_ms <= 600_000:
            raise ValueError("down_after_ms must be within 100 .. 600000")
        if not 1000 <= failover_timeout_ms <= 3_600_000:
            raise ValueError("failover_timeout_ms must be within 1000 .. 3600000")
        check_password("password", password)
        check_password("sentinel_password", sentinel_password)
        self.master_name = master_name
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.servers: list[RedisServer] = []
        self.sentinel_ports: list[int] = []
        self._lease = PortLease()
        self._sentinels: list[JavaProcess] = []
        self._want_proxy = replication_proxy
        self.replication_link: FaultProxy | None = None
        self.password = password
        self.sentinel_password = sentinel_password
        self.tls = tls
        self._client_tls = None if tls is None else client_context(tls)

    @property
    def url(self) -> str:
        """``redis+sentinel://[:<password>@]127.0.0.1:<s1>,…/<master_name>/0`` (the gateway's
        form), with ``?sentinel_password=…`` when the sentinels require one."""
        if not self.sentinel_ports:
            raise RedisServerError("the sentinel set was never started")
        hosts = ",".join(f"{HOST}:{p}" for p in self.sentinel_ports)
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        options = [] if self.tls is None else [client_url_options(self.tls)]
        if self.sentinel_password is not None:
            options.append(urlencode({"sentinel_password": self.sentinel_password}))
        query = f"?{'&'.join(options)}" if options else ""
        scheme = "redis+sentinel" if self.tls is None else "rediss+sentinel"
        return f"{scheme}://{auth}{hosts}/{self.master_name}/0{query}"

    def _sentinel_log(self, i: int) -> Path:
        return self.data_dir / f"sentinel-{i}" / "sentinel.log"

    async def start(self) -> None:
        """Start primary, replica and sentinels; wait until the sentinels know each other.

        Nothing when it runs; a start while another is under way waits for it.

        Raises:
            ToolNotFoundError: ``redis-server`` is not installed.
            RedisServerError: a process exited or the set was not ready within
                ``start_timeout`` (the error carries the relevant log's tail).
        """
        async with self._lifecycle_lock():
            if not self.servers:
                await self._start()

    async def _start(self) -> None:
        root = self._prepare()
        # a new replica syncs at once, not after the default 5 s diskless-sync delay
        fast_sync = ("--repl-diskless-sync-delay", "0")
        primary = RedisServer(
            binary=self.binary,
            data_dir=root / "node-0",
            extra_args=fast_sync,
            password=self.password,
            tls=self.tls,
        )
        self.servers.append(primary)
        await primary.start()
        upstream = primary.port
        if self._want_proxy:
            self.replication_link = FaultProxy(f"{HOST}:{primary.port}")
            await self.replication_link.start()
            upstream = int(self.replication_link.addr.rpartition(":")[2])
        replica = RedisServer(
            binary=self.binary,
            data_dir=root / "node-1",
            extra_args=(*fast_sync, "--replicaof", HOST, str(upstream)),
            password=self.password,
            tls=self.tls,
        )
        self.servers.append(replica)
        await replica.start()
        await self._poll(
            "the replica's link to the primary",
            lambda: self._link_up(replica.port),
            self.start_timeout,
            replica.log_file,
        )
        self.sentinel_ports = self._lease.take(SENTINELS)
        for i, port in enumerate(self.sentinel_ports):
            self._sentinels.append(self._spawn_sentinel(i, port, primary.port))
        for i, port in enumerate(self.sentinel_ports):
            await self._poll(
                f"sentinel {i} seeing the replica and the other sentinels",
                lambda port=port: self._sentinel_ready(port),  # type: ignore[misc]
                self.start_timeout,
                self._sentinel_log(i),
            )

    def _spawn_sentinel(self, i: int, port: int, primary_port: int) -> JavaProcess:
        home = self.data_dir / f"sentinel-{i}"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "sentinel.conf"  # the sentinel rewrites it: it must be writable
        name = self.master_name
        listen = {"port": str(port)} if self.tls is None else tls_directives(self.tls, port)
        lines = [
            f"bind {HOST}",
            *(f"{directive} {value}" for directive, value in listen.items()),
            f"dir {home}",
            f"logfile {home / 'sentinel.log'}",
            f"sentinel monitor {name} {HOST} {primary_port} {QUORUM}",
            f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
            f"sentinel failover-timeout {name} {self.failover_timeout_ms}",
            f"sentinel parallel-syncs {name} 1",
        ]
        if self.password is not None:
            lines.append(f"sentinel auth-pass {name} {self.password}")
        if self.sentinel_password is not None:
            lines.append(f"requirepass {self.sentinel_password}")
        conf.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        proc = JavaProcess(
            f"sentinel-{i}", [self.binary, str(conf), "--sentinel"], home / "stdout.log", home
        )
        proc.spawn()
        return proc

    async def _data(self, port: int, *args: str) -> Reply | None:
        """A data node's reply (None when it is down or refuses)."""
        return await query(port, *args, password=self.password, tls=self._client_tls)

    async def _sentinel(self, port: int, *args: str) -> Reply | None:
        """A sentinel's reply (None when it is down or refuses)."""
        return await query(port, *args, password=self.sentinel_password, tls=self._client_tls)

    async def _link_up(self, port: int) -> bool:
        fields = info_fields(await self._data(port, "INFO", "replication"))
        return fields.get("master_link_status") == "up"

    async def _sentinel_ready(self, port: int) -> bool:
        reply = await self._sentinel(port, "SENTINEL", "MASTER", self.master_name)
        if not isinstance(reply, list):
            return False
        fields = dict(zip(reply[::2], reply[1::2], strict=False))
        return fields.get("num-slaves") == str(len(self.servers) - 1) and fields.get(
            "num-other-sentinels"
        ) == str(SENTINELS - 1)

    # ---- the roles and a failover ------------------------------------------------------------

    async def primary(self) -> RedisServer:
        """The running server whose ``ROLE`` is master (after a failover: the promoted one).

        Raises:
            RedisServerError: no running server is a primary right now.
        """
        for server in self.servers:
            if server.running:
                role = await self._data(server.port, "ROLE")
                if isinstance(role, list) and role and role[0] == "master":
                    return server
        raise RedisServerError("no running Redis server of the set is a primary")

    async def sentinel_primary_port(self) -> int | None:
        """The primary's port as the first answering sentinel names it (None if none answers)."""
        for port in self.sentinel_ports:
            reply = await self._sentinel(
                port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name
            )
            if isinstance(reply, list) and len(reply) == 2:
                return int(str(reply[1]))
        return None

    async def kill_primary(self) -> RedisServer:
        """SIGKILL the current primary (a crash) and return it; its files stay."""
        server = await self.primary()
        await server.kill()
        return server

    async def wait_failover(self, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Wait until every sentinel names another server than ``old`` and that one is a
        primary; return it.

        Raises:
            RedisServerError: the failover did not end within ``timeout`` seconds (a
                check still running then is cut short; a cancel ends the wait at once).
            ConfigError: ``timeout`` is not a finite number of seconds > 0.
        """

        async def promoted() -> bool:
            ports = []
            for port in self.sentinel_ports:
                reply = await self._sentinel(
                    port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name
                )
                ports.append(int(str(reply[1])) if isinstance(reply, list) else None)
            new = ports[0]
            if new is None or new == old.port or any(p != new for p in ports):
                return False
            role = await self._data(new, "ROLE")
            return isinstance(role, list) and bool(role) and role[0] == "master"

        await self._poll("the sentinels' failover", promoted, timeout, self._sentinel_log(0))
        return await self.primary()

    async def stop(self) -> None:
        """Stop every process (sentinels first), release the ports' reservations and remove a
        temporary directory. Idempotent; waits for a start under way."""
        async with self._lifecycle_lock():
            await self._stop()

    async def _stop(self) -> None:
        sentinels, self._sentinels = self._sentinels, []
        for proc in sentinels:
            await proc.stop(timeout=10.0)
        self._lease.release()
        servers, self.servers = self.servers, []
        for server in servers:
            await server.stop()
        link, self.replication_link = self.replication_link, None
        if link is not None:
            await link.stop()
        self._remove_dir()

    def __repr__(self) -> str:
        """Show the servers' and sentinels' ports."""
        ports = [s._port for s in self.servers]
        return f"<RedisSentinelSet servers={ports} sentinels={self.sentinel_ports}>"
