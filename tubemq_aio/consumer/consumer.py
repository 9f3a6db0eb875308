"""The public server-balanced :class:`Consumer`.

``start()`` registers at the master and then starts the owned background tasks: master
heartbeat, rebalance worker, broker heartbeat and ``fetchers`` fetch loops. ``close()`` cancels
and awaits every one of them, unregisters each partition at its broker and closes at the master.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping
from datetime import datetime
from typing import Unpack

from tubemq_aio.checks import Checks
from tubemq_aio.consumer._base import ConsumerBase
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._listeners import PartitionListeners, PartitionsCallback
from tubemq_aio.consumer._session import MasterSession
from tubemq_aio.consumer._session_base import ConsumerWiring
from tubemq_aio.consumer._time import check_search_timeout, check_times
from tubemq_aio.consumer.batch import MessageBatch
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.consumer.config import ConsumeFrom, ConsumerConfig, ConsumerOptions, TopicsArg
from tubemq_aio.errors import (
    ClientClosedError,
    ConfigError,
    ConsumerConfigError,
    MalformedMetaError,
    RequestTimeoutError,
)
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.consumer_names import planner_group

__all__ = ["Consumer"]

log = logging.getLogger("tubemq_aio.consumer")

#: What ``run()`` hands back for a batch whose every message the handler took.
_HANDLED = object()


class Consumer(ConsumerBase[MasterSession]):
    """An asyncio consumer of one group, balanced by the master (at-least-once delivery).

    The constructor takes keyword configuration, as aiokafka's consumer does (the public
    convention of asyncio clients): each keyword is a :class:`ConsumerConfig` field, collected
    into that frozen value; ``config=`` hands the whole value instead.

    Args:
        masters: master addresses (``"h1:8715,h2:8715"`` or a list); ignored when ``config``
            is given.
        group: the consumer group.
        topics: topic names, or a mapping ``topic -> set of msgType filters``.
        consume_from: ``"latest"`` (default), ``"earliest"`` or ``"latest_always"``, or a
            timezone-aware ``datetime``: before registering, the consumer finds each
            partition's first message stamped at or after it (:meth:`offsets_for_times`), and
            each partition's first registration in this process starts there.
        config: a complete :class:`ConsumerConfig` instead of the arguments above.
        on_assigned: called with the partition keys this consumer just took over; an
            ``async def`` is awaited. Runs in the rebalance worker, bounded by
            ``callback_timeout``; an exception is logged.
        on_revoked: called (or awaited) with the partition keys about to be released: in a
            rebalance, and by :meth:`close` with every partition still held (batches may
            still be acked then).
        **options: further :class:`ConsumerConfig` fields (``heartbeat_interval``, ``fetchers``,
            ``max_prefetch_batches``, ...).

    Raises:
        ConfigError: an argument is invalid (empty group or topics, unknown ``consume_from``;
            with ``consume_from`` a time, a group longer than 919 characters, see
            :meth:`offsets_for_times`).

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
        topics: TopicsArg = (),
        consume_from: ConsumeFrom | datetime = "latest",
        config: ConsumerConfig | None = None,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(
            masters,
            group=group,
            topics=topics,
            consume_from=consume_from,
            config=config,
            options=options,
            listeners=PartitionListeners(on_assigned, on_revoked),
        )
        #: Pause entries (topics and partition keys; "" = everything) -> wall time of the pause.
        self._paused: dict[str, float] = {}
        #: consume_from=datetime: where each partition starts on its first registration.
        self._start_offsets: dict[PartitionKey, int] = {}
        if isinstance(self.config.consume_from, datetime):
            planner_group(self.config.group)  # raises now, not at start, for a too long group

    def __repr__(self) -> str:
        return (
            f"<Consumer group={self.config.group} {self._state()} partitions={len(self._leases)} "
            f"buffered={self._engine.buffered if self._engine else 0}>"
        )

    # ---- life cycle --------------------------------------------------------------------------

    def _open(self) -> tuple[ConsumerWiring, MasterSession]:
        parts = self._wire("Pull")
        session = MasterSession(self.config, parts)
        session.start_offsets = self._start_offsets
        session.is_paused = self._is_paused
        session.on_assigned = self._notify_assigned
        session.on_revoked = self._notify_revoked
        return parts, session

    async def _start(self) -> None:
        when = self.config.start_time
        if when is not None:
            # Resolved before joining the group, so the first registrations have them.
            async with self._planner() as planner:
                keys = [m.partition_key for m in await planner.partitions()]
                found = await planner.search_times(
                    dict.fromkeys(keys, when), self.config.time_search_timeout
                )
            self._start_offsets.update({PartitionKey.parse(k): f.offset for k, f in found.items()})
            log.info(
                "consume_from %s: start offsets %s",
                when.isoformat(),
                {k: f.offset for k, f in found.items()},
            )
        await super()._start()

    def _planner(self) -> ClientBalancedConsumer:
        """A client-balanced consumer of group ``{group}_planner`` for time searches: the
        group's own members and stored offsets stay untouched."""
        config = dataclasses.replace(
            self.config, group=planner_group(self.config.group), consume_from="earliest", bound=None
        )
        return ClientBalancedConsumer(config=config)

    async def offsets_for_times(
        self, times: Mapping[str, datetime], *, timeout: float | None = None
    ) -> dict[str, int | None]:
        """For each partition, the earliest offset from which its messages are stamped
        (``msg_time``) at or after the given time; ``None`` when none is. Same answer and
        cost as :meth:`ClientBalancedConsumer.offsets_for_times
        <tubemq_aio.consumer.client_balanced.ClientBalancedConsumer.offsets_for_times>`
        (``docs/protocol/time.md``), read with a short-lived client-balanced consumer of
        group ``{group}_planner``, so this group's stored offsets and members are left alone.
        Callable whether or not this consumer is started.

        Args:
            times: ``{partition key: timezone-aware datetime}``.
            timeout: seconds the search may take, the planner's registration at the master
                included (default ``time_search_timeout``); releasing what a search cut short
                may hold at a broker that stopped answering adds at most a second.

        Returns:
            ``{partition key: offset or None}``; ``{}`` for no partition, without a request.

        Raises:
            ConsumerConfigError: a naive datetime, a non-string key, not a mapping, a
                ``timeout`` not in ``(0, 86400]`` seconds, a group longer than 919 characters
                (its ``{group}_planner`` would pass the 927 of a consumer group); before any
                request.
            UnknownPartitionError: a malformed partition key (before any request), or one
                the topic does not have.
            RequestTimeoutError: the search took longer than ``timeout``.
            ServerError: the master or a broker refused.
        """
        wanted = check_times(times)
        limit = self.config.time_search_timeout if timeout is None else timeout
        check_search_timeout(limit, ConsumerConfigError)
        if not wanted:
            return {}
        planner = self._planner()
        try:
            # The planner's registration at the master counts against ``timeout`` too.
            async with asyncio.timeout(limit) as scope:
                await planner.start()
                return await planner.offsets_for_times(wanted, timeout=limit)
        except TimeoutError:
            if not scope.expired():
                raise  # an RPC's own timeout, or the search's
            raise RequestTimeoutError(
                f"time search of {len(wanted)} partition(s) took longer than {limit} s"
            ) from None
        finally:
            await planner.close()

    def _spawn_workers(self, session: MasterSession, engine: FetchEngine) -> None:
        self._spawn(session.heartbeat_loop(), "master-heartbeat")
        self._spawn(session.rebalance_loop(), "rebalance")
        super()._spawn_workers(session, engine)

    async def _before_cancel(self, session: MasterSession) -> None:
        session.stop()
        rebalance = [t for t in self._supervisor.tasks if t.get_name().endswith("-rebalance")]
        if rebalance:
            # Let an event in progress finish so no partition stays registered behind our back.
            await asyncio.wait(rebalance, timeout=self.config.close_rebalance_wait)

    async def _release_all(self, session: MasterSession) -> None:
        parts = [p for ps in self._leases.by_broker().values() for p in ps]
        await asyncio.gather(
            *(session.release_partition(p) for p in parts),
            *(session.release_unsure(k) for k in list(session.unsure)),
        )

    # ---- consuming ---------------------------------------------------------------------------

    async def run(
        self, handler: Callable[[Message], Awaitable[object]], *, concurrency: int = 1
    ) -> None:
        """Push style: call ``handler`` for every message until the consumer closes.

        ``concurrency`` workers each take one batch at a time and call ``handler`` on its
        messages in order; the batch is acked when every call succeeded and nacked (delivered
        again) when one raised (acked instead with ``run_error_rollback=False``). Different
        partitions are processed in parallel. When ``run()`` is cancelled, the batches in
        the handlers' hands are nacked (delivered again at once).

        Raises:
            ConfigError: ``concurrency`` is not an integer in ``[1, 4096]`` or ``handler`` is
                not callable; or ``handler`` returned something that cannot be awaited (a
                plain ``def``): ``run()`` stops at the first such message, whose batch is
                nacked (delivered again).
            ClientClosedError: the consumer was never started (or is closed already), or a
                background task crashed; ``run()`` returns normally when ``close()`` ends it.
        """
        checks = Checks("run")
        checks.integer("concurrency", concurrency, low=1, high=4096)
        if not callable(handler):
            checks.problem(f"handler must be an async callable, got {type(handler).__name__}")
        checks.done()
        self._check_running()
        telemetry, group_name = self.telemetry, self.config.group
        rollback = self.config.run_error_rollback
        # Anything else may return an awaitable or not: each result is checked.
        checked = inspect.iscoroutinefunction(handler)

        async def handle(batch: MessageBatch) -> object:
            """Call ``handler`` on each message; the first result that is no awaitable (the
            handler is not async), else :data:`_HANDLED`."""
            for message in batch:
                if telemetry is None or not telemetry.active():
                    result = handler(message)
                    if not checked and not inspect.isawaitable(result):
                        return result
                    await result
                else:
                    with telemetry.process(message, group_name):
                        result = handler(message)
                        if not checked and not inspect.isawaitable(result):
                            return result
                        await result
            return _HANDLED

        async def worker() -> None:
            while True:
                try:
                    batch = await self.getmany(timeout=None)
                except ClientClosedError:
                    if self.closed:
                        return
                    raise
                try:
                    refused = await handle(batch)
                except Exception:
                    if rollback:
                        log.exception(
                            "handler failed; the batch of %s will be redelivered",
                            batch.partition_key,
                        )
                        await batch.nack()
                    else:
                        log.exception(
                            "handler failed; the batch of %s counts as consumed",
                            batch.partition_key,
                        )
                        await batch.ack()
                    continue
                except BaseException:
                    # Cancelled (run() itself, or with a failing sibling worker): the batch
                    # comes again now, not after confirm_timeout with its partition idle.
                    await batch.nack()
                    raise
                if refused is not _HANDLED:
                    await batch.nack()
                    raise ConfigError(
                        "run: handler must be an async callable (async def, or one returning "
                        f"an awaitable); it returned {type(refused).__name__}"
                    )
                await batch.ack()

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(concurrency):
                    group.create_task(worker())
        except BaseExceptionGroup as failed:
            # The first worker's error (its cause kept), as documented, not the TaskGroup's
            # group of every worker's.
            first = failed.exceptions[0]
            raise first from first.__cause__

    # ---- inspection and control --------------------------------------------------------------

    def _is_paused(self, key: PartitionKey) -> bool:
        paused = self._paused
        return bool(paused) and ("" in paused or key.topic in paused or key.format() in paused)

    def _keys(self, which: set[str]) -> list[PartitionKey]:
        held = self._leases.keys()
        return [k for k in held if "" in which or k.topic in which or k.format() in which]

    def pause(self, which: str | Iterable[str] | None = None) -> None:
        """Stop fetching the given topics or partition keys (everything when None), including
        partitions assigned later. Batches already buffered are still delivered.

        Args:
            which: one topic or partition key, a collection of them, or None for everything.

        Raises:
            ConfigError: ``which`` is not a name or a collection of non-blank names, or names
                something this consumer does not subscribe to (a topic not in ``topics``, or a
                partition key, ``brokerId:topic:partitionId``, of such a topic).
        """
        names = {""} if which is None else set(_names("pause", which, self.config.topics))
        now = time.time()
        for name in names:
            self._paused.setdefault(name, now)  # paused again: still paused since the first
        self._leases.pause(self._keys(names))

    def resume(self, which: str | Iterable[str] | None = None) -> None:
        """Undo :meth:`pause` for the given topics or partition keys (everything when None).

        A partition stays paused while any remaining pause entry (its topic, its key, or a
        pause of everything) still covers it.

        Raises:
            ConfigError: ``which`` is not a name or a collection of non-blank names, or names
                something this consumer does not subscribe to (as for :meth:`pause`).
        """
        names = (
            set(self._paused) if which is None else set(_names("resume", which, self.config.topics))
        )
        for name in names:
            self._paused.pop(name, None)
        self._leases.resume([k for k in self._keys(names) if not self._is_paused(k)])
        if self._engine is not None:
            self._engine.notify()

    @property
    def is_paused(self) -> bool:
        """True while everything is paused (:meth:`pause` with no argument; Java
        ``isConsumePaused``); pauses of single topics or partitions do not count."""
        return "" in self._paused

    def paused_partitions(self) -> dict[str, float]:
        """Held partitions that are paused now, each with the wall time (seconds since the
        epoch) since which it is paused: the earliest pause that covers it, of its key, its
        topic or everything (Java ``getFrozenPartInfo``, which gives milliseconds)."""
        paused = self._paused
        result: dict[str, float] = {}
        for key in sorted(self._leases.keys()):
            text = key.format()
            since = [paused[n] for n in ("", key.topic, text) if n in paused]
            if since:
                result[text] = min(since)
        return result


def _names(call: str, which: object, topics: Container[str] | None = None) -> tuple[str, ...]:
    """``which`` of pause/resume as names: one string is one name, never its characters; with
    ``topics``, each name must be one of them or a partition key of one (a name that matches
    nothing would pause nothing, silently)."""
    checks = Checks(call)
    names = checks.names("which", which)
    unknown = [] if topics is None else [n for n in names if _topic_of(n) not in topics]
    for name in unknown:
        checks.problem(
            f"{name!r} is neither a subscribed topic nor a partition key "
            "(brokerId:topic:partitionId) of one"
        )
    checks.done()
    return names


def _topic_of(name: str) -> str:
    """The topic ``name`` of pause/resume names: itself, or the topic of a partition key."""
    if ":" not in name:
        return name
    try:
        return PartitionKey.parse(name).topic
    except MalformedMetaError:
        return ""
