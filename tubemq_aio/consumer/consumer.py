"""The public server-balanced :class:`Consumer`.

``start()`` registers at the master and then starts the owned background tasks: master
heartbeat, rebalance worker, broker heartbeat and ``fetchers`` fetch loops. ``close()`` cancels
and awaits every one of them, unregisters each partition at its broker and closes at the master.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from tubemq_aio._client import AsyncLifecycle, local_ip_towards, open_pool, spawn_owned
from tubemq_aio._io.pool import ConnectionPool
from tubemq_aio._io.sweeper import cancel_and_wait
from tubemq_aio.auth import TokenState
from tubemq_aio.consumer._broker import BrokerRpc, make_consumer_id
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._iterator import MessageIterator
from tubemq_aio.consumer._session import MasterSession
from tubemq_aio.consumer.batch import ConsumerStats, MessageBatch, PartitionPosition
from tubemq_aio.consumer.config import ConsumeFrom, ConsumerConfig
from tubemq_aio.errors import ClientClosedError, ConfigError
from tubemq_aio.master import MasterInvoker, PoolCaller
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.partitions import PartitionLeases

__all__ = ["Consumer"]

log = logging.getLogger("tubemq_aio.consumer")

#: Longest time close() lets the rebalance worker finish the event it is processing.
_REBALANCE_STOP_WAIT = 5.0

PartitionsCallback = Callable[[list[str]], object]


class Consumer(AsyncLifecycle):
    """An asyncio consumer of one group, balanced by the master (at-least-once delivery).

    Args:
        masters: master addresses (``"h1:8715,h2:8715"`` or a list); ignored when ``config``
            is given.
        group: the consumer group.
        topics: topic names, or a mapping ``topic -> set of msgType filters``.
        consume_from: ``"latest"`` (default), ``"earliest"`` or ``"latest_always"``.
        config: a complete :class:`ConsumerConfig` instead of the arguments above.
        on_assigned: called with the partition keys this consumer just took over.
        on_revoked: called with the partition keys about to be released in a rebalance.
        **options: further :class:`ConsumerConfig` fields (``heartbeat_interval``, ``fetchers``,
            ``max_prefetch_batches``, ...).

    Raises:
        ConfigError: an argument is invalid (empty group or topics, unknown ``consume_from``).

    Example::

        async with Consumer("127.0.0.1:8715", group="g1", topics=["demo"]) as consumer:
            async for msg in consumer:
                print(msg.body)
    """

    def __init__(
        self,
        masters: str | Iterable[str] | None = None,
        *,
        group: str = "",
        topics: Any = (),
        consume_from: ConsumeFrom = "latest",
        config: ConsumerConfig | None = None,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        **options: Any,
    ) -> None:
        if config is None:
            if masters is None:
                raise ConfigError("masters is required")
            config = ConsumerConfig(
                masters=masters,  # type: ignore[arg-type]  # parsed by ClientConfig
                group=group,
                topics=topics,
                consume_from=consume_from,
                **options,
            )
        self.config = config
        self.stats = ConsumerStats()
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self._leases = PartitionLeases()
        self._tasks: list[asyncio.Task[None]] = []
        self._engine: FetchEngine | None = None
        self._session: MasterSession | None = None
        self._pool: ConnectionPool | None = None
        self._started = False
        self._closed = False
        self._iterator = MessageIterator(self.getmany, auto_ack=config.auto_ack)
        self._paused: set[str] = set()  # topics and partition keys; "" = everything

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._started else "new"
        return (
            f"<Consumer group={self.config.group} {state} partitions={len(self._leases)} "
            f"buffered={self._engine.buffered if self._engine else 0}>"
        )

    @property
    def client_id(self) -> str | None:
        """The consumer id registered at the master (None before :meth:`start`)."""
        return self._session.client_id if self._session else None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    # ---- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Register at the master and start the background tasks.

        Returns once registered; partitions arrive with the master's next rebalance.

        Raises:
            ClientClosedError: the consumer was closed.
            ServerError: the master refused the registration (e.g. topic not deployed).
            NetworkError: no master could be reached.
        """
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if self._started:
            return
        cfg = self.config
        loop = asyncio.get_running_loop()
        clock = loop.time
        pool = open_pool(cfg)
        tls = cfg.ssl_context is not None
        first = cfg.masters[0]
        host = cfg.client_host or local_ip_towards(first.host, first.port)
        flow = FlowControlState()
        tokens = TokenState(cfg.credentials)
        broker = BrokerRpc(
            pool,
            client_id=make_consumer_id(cfg.group, host),
            group=cfg.group,
            tokens=tokens,
            flow=flow,
            timeout=cfg.rpc_timeout,
            tls=tls,
        )
        engine = FetchEngine(cfg, self._leases, broker, flow, self.stats, clock)
        invoker = MasterInvoker(PoolCaller(pool, tls=tls), cfg.masters, cfg.rpc_timeout)
        session = MasterSession(
            cfg, invoker, broker, engine, self._leases, flow, tokens, host, clock
        )
        session.is_paused = self._is_paused
        session.on_assigned = self._call_assigned
        session.on_revoked = self._call_revoked
        try:
            await session.register()
        except BaseException:
            await pool.close()
            raise
        self._pool, self._engine, self._session = pool, engine, session
        self._started = True
        self._spawn(session.heartbeat_loop(), "master-heartbeat")
        self._spawn(session.rebalance_loop(), "rebalance")
        self._spawn(session.broker_heartbeat_loop(), "broker-heartbeat")
        for i in range(cfg.fetchers):
            self._spawn(engine.run(), f"fetch-{i}")
        log.info("consumer %s registered for %s", session.client_id, list(cfg.topics))

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        spawn_owned(self._tasks, coro, f"tubemq-consumer-{name}")

    def _call_assigned(self, keys: list[str]) -> None:
        if self.on_assigned is not None:
            _safe_call(self.on_assigned, keys)

    def _call_revoked(self, keys: list[str]) -> None:
        if self.on_revoked is not None:
            _safe_call(self.on_revoked, keys)

    async def close(self) -> None:
        """Stop every background task, release all partitions at their brokers (committing
        acked batches, rolling back unacked ones) and close the session at the master.

        Idempotent. Batches still held by the application can no longer be acked (their
        messages will be delivered again to whoever takes the partition).
        """
        if self._closed:
            return
        self._closed = True
        session, engine = self._session, self._engine
        if session is None or engine is None:
            return
        session.stop()
        rebalance = [t for t in self._tasks if t.get_name().endswith("-rebalance")]
        if rebalance:
            # Let an event in progress finish so no partition stays registered behind our back.
            await asyncio.wait(rebalance, timeout=_REBALANCE_STOP_WAIT)
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        engine.close()
        try:
            async with asyncio.timeout(self.config.close_timeout):
                parts = [p for ps in self._leases.by_broker().values() for p in ps]
                await asyncio.gather(*(session.release_partition(p) for p in parts))
                await session.close_at_master()
        except TimeoutError:
            log.warning("close did not finish releasing partitions in time")
        finally:
            if self._pool is not None:
                await self._pool.close()

    # ---- consuming ---------------------------------------------------------------------------

    def _running_engine(self) -> FetchEngine:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if self._engine is None:
            raise ClientClosedError("the consumer is not started; call start() first")
        return self._engine

    async def getmany(
        self, *, max_records: int | None = None, timeout: float | None = None
    ) -> MessageBatch:
        """Wait for the next batch of one partition.

        Args:
            max_records: at most this many messages (a broker batch is split into parts that
                are acked together: the partition's offset moves once every part was acked).
            timeout: seconds to wait; ``None`` waits until data arrives or the consumer closes.

        Returns:
            The batch; empty (falsy) when ``timeout`` passed without data.

        Raises:
            ClientClosedError: the consumer is closed (or was never started).
            ConfigError: ``max_records`` is not positive.
        """
        if max_records is not None and max_records < 1:
            raise ConfigError("max_records must be at least 1")
        return await self._running_engine().get(max_records, timeout)

    def __aiter__(self) -> MessageIterator:
        """Iterate messages; a batch is acked when all its messages were yielded and the loop
        asks for the next message. The loop ends when the consumer is closed."""
        return self._iterator

    async def commit(self) -> int:
        """Acknowledge what ``async for`` yielded so far (with ``auto_ack=False``).

        Acks every batch whose messages were all yielded; a batch still being iterated is
        acked by a later call.

        Returns:
            How many batches were acked (the others had lost their lease and come again).
        """
        return await self._iterator.commit()

    async def run(
        self, handler: Callable[[Message], Awaitable[object]], *, concurrency: int = 1
    ) -> None:
        """Push style: call ``handler`` for every message until the consumer closes.

        ``concurrency`` workers each take one batch at a time and call ``handler`` on its
        messages in order; the batch is acked when every call succeeded and nacked (delivered
        again) when one raised. Different partitions are processed in parallel.

        Raises:
            ConfigError: ``concurrency`` is not positive.
        """
        if concurrency < 1:
            raise ConfigError("concurrency must be at least 1")

        async def worker() -> None:
            while True:
                try:
                    batch = await self.getmany(timeout=None)
                except ClientClosedError:
                    return
                try:
                    for message in batch:
                        await handler(message)
                except Exception:
                    log.exception("handler failed; the batch of %s will be redelivered",
                                  batch.partition_key)  # fmt: skip
                    await batch.nack()
                else:
                    await batch.ack()

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())

    # ---- inspection and control --------------------------------------------------------------

    def assignment(self) -> list[str]:
        """Keys (``brokerId:topic:partitionId``) of the partitions held now."""
        return sorted(k.format() for k in self._leases.keys())  # noqa: SIM118

    def positions(self) -> dict[str, PartitionPosition]:
        """Per held partition: current offset, max offset and lag (messages), as last reported."""
        return {
            k.format(): PartitionPosition(k.format(), o.curr_offset, o.max_offset, o.lag)
            for k, o in sorted(self._leases.offsets().items())
        }

    def _is_paused(self, key: PartitionKey) -> bool:
        paused = self._paused
        return bool(paused) and ("" in paused or key.topic in paused or key.format() in paused)

    def _keys(self, which: set[str]) -> list[PartitionKey]:
        held = self._leases.keys()
        return [k for k in held if "" in which or k.topic in which or k.format() in which]

    def pause(self, which: Iterable[str] | None = None) -> None:
        """Stop fetching the given topics or partition keys (everything when None), including
        partitions assigned later. Batches already buffered are still delivered."""
        names = {""} if which is None else set(which)
        self._paused |= names
        self._leases.pause(self._keys(names))

    def resume(self, which: Iterable[str] | None = None) -> None:
        """Undo :meth:`pause` for the given topics or partition keys (everything when None).

        A partition stays paused while any remaining pause entry (its topic, its key, or a
        pause of everything) still covers it.
        """
        names = set(self._paused) if which is None else set(which)
        self._paused -= names
        self._leases.resume([k for k in self._keys(names) if not self._is_paused(k)])
        if self._engine is not None:
            self._engine.notify()


def _safe_call(callback: PartitionsCallback, keys: list[str]) -> None:
    try:
        callback(keys)
    except Exception:
        log.exception("rebalance listener %r failed", callback)
