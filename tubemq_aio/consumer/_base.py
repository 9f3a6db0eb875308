"""What :class:`Consumer` and :class:`ClientBalancedConsumer` share: life cycle and delivery.

Both register a session at the master, run the same background workers (master and broker
heartbeats, fetchers) and deliver batches from the same fetch engine; they differ in who
assigns partitions. Subclasses build their session (:meth:`ConsumerBase._open`) and release
what they hold on close (:meth:`ConsumerBase._release_all`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, Self, TypeVar, Unpack

from tubemq_aio._client import AsyncLifecycle
from tubemq_aio._stats_log import log_stats_every
from tubemq_aio.checks import Checks, check_options
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._iterator import MessageStream
from tubemq_aio.consumer._listeners import PartitionListeners, check_callbacks, notify
from tubemq_aio.consumer._positions import PositionsView
from tubemq_aio.consumer._readiness import wait_for_partitions
from tubemq_aio.consumer._session_base import ConsumerWiring, SessionBase, wire_consumer
from tubemq_aio.consumer.batch import ConsumerStats, MessageBatch, PartitionPosition
from tubemq_aio.consumer.config import ConsumeFrom, ConsumerConfig, ConsumerUrlOptions, TopicsArg
from tubemq_aio.errors import ClientClosedError, ConfigError
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.partitions import PartitionLeases
from tubemq_aio.telemetry import Gauge, live, telemetry_for

__all__ = ["ConsumerBase"]

log = logging.getLogger("tubemq_aio.consumer")

SessionT = TypeVar("SessionT", bound=SessionBase)

#: The OpenTelemetry attribute of the consumer group on every consumer gauge.
_GROUP = "messaging.consumer.group.name"


class ConsumerBase(AsyncLifecycle, Generic[SessionT]):
    """Configuration, start/close, background workers and batch delivery of a consumer.

    Args:
        masters: master addresses; ignored with ``config``.
        group: the consumer group.
        topics: topic names, or a mapping ``topic -> set of msgType filters``.
        consume_from: where a partition without a stored group offset starts.
        config: a complete :class:`ConsumerConfig` instead of the arguments above.
        options: further :class:`ConsumerConfig` fields.
        on_assigned: called (a coroutine awaited) with partition keys this consumer took over.
        on_revoked: called (a coroutine awaited) with partition keys about to be released,
            also by :meth:`close` with every partition still held.

    Raises:
        ConfigError: an argument is invalid.
    """

    #: Prefix of the background tasks' names.
    _task_prefix = "tubemq-consumer"

    def __init__(
        self,
        masters: str | Iterable[str] | None,
        *,
        group: str,
        topics: TopicsArg,
        consume_from: ConsumeFrom | datetime,
        config: ConsumerConfig | None,
        options: Mapping[str, Any],
        listeners: PartitionListeners,
    ) -> None:
        checks = Checks(type(self).__name__)
        check_callbacks(checks, on_assigned=listeners.on_assigned, on_revoked=listeners.on_revoked)
        checks.done()
        if config is None:
            check_options(ConsumerConfig, options, what=type(self).__name__)
            config = ConsumerConfig(
                masters=masters,  # type: ignore[arg-type]  # parsed by ClientConfig
                group=group,
                topics=topics,  # type: ignore[arg-type]  # normalised by ConsumerConfig
                consume_from=consume_from,
                **options,
            )
        else:
            given = Checks(type(self).__name__)
            if masters is not None or group or topics or options:
                given.problem("pass either config= or masters, group, topics and options, not both")
            given.instance("config", config, ConsumerConfig)
            given.done()
        self.config = config
        #: Called with the partition keys this consumer took over (see :mod:`._listeners`).
        self.on_assigned = listeners.on_assigned
        #: Called with the partition keys about to be released, and by :meth:`close`.
        self.on_revoked = listeners.on_revoked
        #: Counters of fetches, batches, messages, acks and rests (:class:`ConsumerStats`).
        self.stats = ConsumerStats()
        self._leases = PartitionLeases()
        self._positions = PositionsView(self._leases)
        self._engine: FetchEngine | None = None
        self._session: SessionT | None = None
        self._registered = False
        self._init_lifecycle(self._task_prefix)
        #: OpenTelemetry instrumentation (``None`` when off, see :mod:`tubemq_aio.telemetry`).
        self.telemetry = telemetry_for(config.telemetry)
        if self.telemetry is not None:
            self.telemetry.watch(self._gauges)
        self._stream = MessageStream(
            self.getmany, auto_ack=config.auto_ack, closed=lambda: self.closed
        )

    _kind = "consumer"

    @classmethod
    def from_url(cls, url: str, **options: Unpack[ConsumerUrlOptions]) -> Self:
        """Build a consumer from ``tubemq://user:password@h1:8715,h2:8715?rpc_timeout=5`` and
        :class:`ConsumerConfig` keywords (``group=``, ``topics=``, ...); see
        :meth:`~tubemq_aio.config.ClientConfig.from_url`.

        Raises:
            ConfigError: the URL or an option is invalid.
        """
        return cls._from_url(url, options)

    @classmethod
    def _from_url(cls, url: str, options: Mapping[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(ConsumerConfig)}
        # The constructor's own keywords (callbacks, client-balanced placement) pass through; any
        # other name would reach its **options and read as "config= and options, not both".
        own = {
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "config"
        }
        unknown = sorted(set(options) - names - own)
        if unknown:
            raise ConfigError(
                f"{cls.__name__}.from_url: unknown option(s) {', '.join(map(repr, unknown))}"
            )
        config = ConsumerConfig.from_url(url, **{k: v for k, v in options.items() if k in names})
        return cls(config=config, **{k: v for k, v in options.items() if k not in names})

    def _state(self) -> str:
        return self._lifecycle_state()

    @property
    def client_id(self) -> str | None:
        """The consumer id registered at the master (None before :meth:`start`)."""
        return self._session.client_id if self._session else None

    # ---- life cycle --------------------------------------------------------------------------

    def _wire(self, kind: str) -> ConsumerWiring:
        clock = asyncio.get_running_loop().time
        return wire_consumer(self.config, self._leases, self.stats, clock, kind)

    def _open(self) -> tuple[ConsumerWiring, SessionT]:
        """Build this kind's session (no I/O yet)."""
        raise NotImplementedError

    def _spawn_workers(self, session: SessionT, engine: FetchEngine) -> None:
        """Start the background tasks of a registered session."""
        self._spawn(session.broker_heartbeat_loop(), "broker-heartbeat")
        for i in range(self.config.fetchers):
            self._spawn(engine.run(), f"fetch-{i}")
        interval = self.config.stats_log_interval
        if interval is not None:
            self._spawn(log_stats_every(interval, self._stats_name, self._stats_values), "stats")

    def _stats_name(self) -> str:
        return f"{type(self).__name__} {self.client_id}"

    def _stats_values(self) -> dict[str, object]:
        engine = self._engine
        return {
            **self.stats.snapshot(),
            "partitions": len(self._leases),
            "buffered": engine.buffered if engine is not None else 0,
        }

    async def _start(self) -> None:
        """Register at the master and start the background tasks.

        Raises:
            TopicNotDeployedError: the master says a subscribed topic is not deployed (a
                ``ServerError`` with ``err_code`` 431 too), at once.
            ServerError: the master refused the registration.
            NetworkError: no master could be reached.
        """
        parts, session = self._open()
        self._pool, self._engine, self._session = parts.pool, parts.engine, session
        await session.register()
        self._registered = True
        self._spawn_workers(session, parts.engine)
        log.info(
            "%s %s registered for %s",
            type(self).__name__,
            session.client_id,
            list(self.config.topics),
        )

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._supervisor.spawn(coro, name)

    def _on_crash(self, name: str, exc: BaseException) -> None:
        if self._engine is not None:
            self._engine.close()  # wake getmany(): it raises the crash

    async def _before_cancel(self, session: SessionT) -> None:
        """Let work that must not be cut short finish before the tasks are cancelled."""

    async def _release_all(self, session: SessionT) -> None:
        """Unregister every partition held at a broker."""
        raise NotImplementedError

    async def _teardown(self) -> None:
        """Stop every background task, release all partitions at their brokers (committing
        acked batches, rolling back unacked ones) and close the session at the master.

        Batches still held by the application can no longer be acked (their messages will be
        delivered again to whoever takes the partition).
        """
        session, engine = self._session, self._engine
        if session is None or engine is None:
            return
        try:
            await self._release(session, engine)
        finally:
            session.broker.astray.close()  # after the unregisters above, which may wait

    async def _release(self, session: SessionT, engine: FetchEngine) -> None:
        """:meth:`_teardown` once started: stop the tasks, release the partitions, close."""
        if self._registered:
            await self._before_cancel(session)
        await self._supervisor.close()
        if self._registered and len(self._leases):
            # Like a Kafka consumer leaving its group: the application hears which partitions
            # it gives up (and may still ack their batches) before they are released.
            await self._notify_revoked(self.assignment())
        engine.close()
        if not self._registered:
            return
        close_timeout = self.config.close_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + close_timeout
        try:
            async with asyncio.timeout(close_timeout):
                await self._release_all(session)
        except TimeoutError:
            # The master is not told either: its own close would outlast close_timeout.
            log.warning(
                "close_timeout (%s s) ended before every partition was released at its broker "
                "and before the master was told: the brokers keep the partitions not released "
                "until their registrations expire",
                close_timeout,
            )
            return
        await session.close_at_master(max(0.0, deadline - loop.time()))

    async def _notify_assigned(self, keys: list[str]) -> None:
        await notify(
            self.on_assigned, keys, what="on_assigned", timeout=self.config.callback_timeout
        )

    async def _notify_revoked(self, keys: list[str]) -> None:
        await notify(self.on_revoked, keys, what="on_revoked", timeout=self.config.callback_timeout)

    def _running(self) -> tuple[SessionT, FetchEngine]:
        self._check_running()
        assert self._session is not None
        assert self._engine is not None
        return self._session, self._engine

    # ---- consuming ---------------------------------------------------------------------------

    async def getmany(
        self, *, max_records: int | None = None, timeout: float | None = None
    ) -> MessageBatch:
        """Wait for the next batch of one partition (ack or nack it).

        Args:
            max_records: at most this many messages (a broker batch is split into parts that
                are acked together: the partition's offset moves once every part was acked).
            timeout: seconds to wait; ``None`` waits until data arrives or the consumer closes.

        Returns:
            The batch; empty (falsy) when ``timeout`` passed without data.

        Raises:
            ClientClosedError: the consumer is closed (or was never started).
            ConfigError: ``max_records`` is not a positive integer, or ``timeout`` is not a
                number of seconds in ``[0, 86400]``.
        """
        if max_records is not None or timeout is not None:
            checks = Checks("getmany")
            if max_records is not None:
                checks.integer("max_records", max_records, low=1)
            if timeout is not None:
                checks.seconds("timeout", timeout, low_open=False)  # 0: take what is buffered
            checks.done()
        _, engine = self._running()
        telemetry = live(self.telemetry)
        started = time.time_ns() if telemetry is not None else 0
        try:
            batch = await engine.get(max_records, timeout)
        except ClientClosedError:
            self._supervisor.raise_if_crashed()
            raise
        if telemetry is not None and batch:
            telemetry.received(
                batch.topic, batch.partition_key, self.config.group, len(batch), started
            )
        return batch

    def __aiter__(self) -> AsyncIterator[Message]:
        """Iterate messages (see :meth:`messages`); ``async for msg in consumer``."""
        return self._stream.iterate()

    def messages(self) -> AsyncIterator[Message]:
        """A new message iterator with its own position (``async for`` calls this).

        Every loop has its own state: two loops over one consumer never share a batch. With
        ``auto_ack`` a batch is acked when the loop asks for the message after its last one.
        When a loop ends early (``break``, an exception, the iterator dropped or ``aclose()``d),
        the messages it yielded count as consumed (acked with ``auto_ack``, else left for
        :meth:`commit`) and the rest of its batch goes back to the consumer: the next loop or
        :meth:`getmany` call gets it first. A loop running when the consumer is closed ends
        (quietly); a loop started on a closing or closed consumer raises.

        Raises:
            ClientClosedError: (from the loop) the consumer was never started, is still
                starting, is closing or closed, or a background task crashed.
        """
        return self._stream.iterate()

    async def commit(self) -> int:
        """Acknowledge what ``async for`` yielded so far (any ``auto_ack``).

        Acks every batch whose messages were all yielded (the broker's offset moves past it).
        A loop left in the middle of a batch (``break``, ``return``, an exception) has the part
        it yielded acked and the rest handed back, first in line for the next ``async for`` or
        ``getmany``: TubeMQ commits whole broker batches, so the broker's offset moves past
        that batch once the rest was acked too, and a restart before then delivers the whole
        batch again (at-least-once). A loop still running (another task's, paused in the
        middle of a batch) keeps its batch: a later call acks it. Served while the consumer
        runs and while it closes (until its partitions are released, e.g. from ``on_revoked``).

        Returns:
            How many batches (or yielded parts of batches) were acked; a batch whose lease was
            gone is not counted and comes again.

        Raises:
            ClientClosedError: the consumer was never started, is still starting, or is closed
                (what it yielded and did not commit was rolled back at close).
        """
        closing = self._close_task
        if closing is None:
            self._check_running()
        elif closing.done():
            raise ClientClosedError(
                f"this {self._kind} is closed: what it yielded and did not commit was rolled back"
            )
        return await self._stream.commit()

    # ---- inspection --------------------------------------------------------------------------

    def assignment(self) -> list[str]:
        """Keys (``brokerId:topic:partitionId``) of the partitions fetched now, sorted."""
        return sorted(k.format() for k in self._leases.keys())  # noqa: SIM118

    async def wait_for_assignment(self, timeout: float = 30.0) -> list[str]:
        """Wait until this consumer holds at least one partition (Java ``isPartitionsReady``).

        Args:
            timeout: seconds to wait at most (default 30; 0 looks once).

        Returns:
            The held partition keys, as :meth:`assignment` gives them.

        Raises:
            ConfigError: ``timeout`` is not a finite number >= 0.
            AssignmentTimeoutError: nothing was held within ``timeout`` (also a
                ``TimeoutError``).
            ClientClosedError: the consumer is not started, or was closed while waiting.
        """
        return await wait_for_partitions(self.assignment, self._check_running, timeout)

    def _position(self, key: PartitionKey) -> PartitionPosition:
        # One partition's record (O(1)): connect() calls this once per partition it adds.
        o = self._leases.offset_of(key)
        if o is None:
            raise KeyError(key)
        return PartitionPosition.of(key.format(), o)

    def _gauges(self) -> list[Gauge]:
        """This consumer's observable gauges (read from the exporter's thread: plain reads)."""
        me = {"tubemq.client.id": self.client_id or "", _GROUP: self.config.group}
        engine, pool = self._engine, self._pool
        gauges: list[Gauge] = [
            ("tubemq.client.fetch.buffered", engine.buffered if engine is not None else 0, me),
            ("tubemq.client.reconnects", pool.stats.reconnects if pool is not None else 0, me),
        ]
        try:
            held = self._leases.offsets()
        except RuntimeError:  # the event loop changed the partitions meanwhile: next time
            held = {}
        for key, offsets in held.items():
            labels = {
                **me,
                "messaging.destination.name": key.topic,
                "messaging.destination.partition.id": key.format(),
            }
            gauges.append(("tubemq.client.partition.lag", offsets.lag, labels))
        return gauges

    def positions(self) -> Mapping[str, PartitionPosition]:
        """Per fetched partition: the group's current offset, the max offset and the lag in
        messages, as last reported by its broker (register, fetch and commit answers).

        Returns:
            A read-only mapping ``"brokerId:topic:partitionId" -> PartitionPosition``,
            iterated in key order (broker id, topic, partition id): a snapshot as of the call
            (later fetches, commits, added or removed partitions do not show). The call costs
            one C-level dict copy (never a Python-level walk that could hold up the event
            loop); each position is built when first read. ``dict(...)`` of it is
            a plain dict; it compares equal to a dict of the same items.
        """
        return self._positions()
