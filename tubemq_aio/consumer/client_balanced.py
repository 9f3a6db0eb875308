"""The client-balanced consumer: the application picks partitions and start offsets
(docs/protocol/consumer.md §8).

The master only tracks membership, metadata and flow control (V2 register/heartbeat,
GetPartMeta) and never rebalances the group; fetching and batches reuse the server-balanced
consumer's fetch engine and :class:`MessageBatch`. Guide: ``docs/client-balanced-consumer.md``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Self, Unpack

from tubemq_aio.checks import Checks
from tubemq_aio.consumer._base import ConsumerBase
from tubemq_aio.consumer._cb_assigner import Assignor, keep_assigned
from tubemq_aio.consumer._cb_models import (
    A,
    BatchCodec,
    BatchRead,
    PartitionMeta,
    PositionedRead,
    ReadAt,
    T,
    assign_modulo,
    parse_key,
)
from tubemq_aio.consumer._cb_ops import (
    MESSAGES,
    read_batch,
    resolve_partition,
)
from tubemq_aio.consumer._cb_session import ClientBalanceSession
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._keyed_locks import KeyedLocks
from tubemq_aio.consumer._listeners import PartitionListeners, PartitionsCallback
from tubemq_aio.consumer._session_base import ConsumerWiring
from tubemq_aio.consumer._time import (
    TimeOffset,
    check_search_timeout,
    check_times,
    search_offset,
    search_offsets,
)
from tubemq_aio.consumer.batch import MessageBatch, PartitionPosition
from tubemq_aio.consumer.config import (
    ConsumeFrom,
    ConsumerConfig,
    ConsumerOptions,
    ConsumerUrlOptions,
    TopicsArg,
)
from tubemq_aio.errors import (
    ClientBalanceConfigError,
    PartitionAlreadyConnectedError,
    PartitionNotConnectedError,
    TubeMQError,
    UnknownPartitionError,
    server_error,
)
from tubemq_aio.protocol.client_balance import validate_bootstrap_offset, validate_node
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.partitions import IMMEDIATE_RELEASE_MS

__all__ = [
    "ClientBalancedConsumer",
    "ClientBalancedUrlOptions",
    "PartitionMeta",
    "PositionedRead",
    "assign_modulo",
]

log = logging.getLogger("tubemq_aio.consumer")

#: Seconds between two looks for partitions a call without answer may have left registered.
_UNSURE_CHECK_INTERVAL = 1.0


class ClientBalancedUrlOptions(ConsumerUrlOptions, total=False):
    """The keywords of :meth:`ClientBalancedConsumer.from_url`: those of
    ``Consumer.from_url`` and the client-balanced constructor's own."""

    source_count: int
    node_id: int
    reassign_interval: float | None
    assignor: Assignor


class ClientBalancedConsumer(ConsumerBase[ClientBalanceSession]):
    """A consumer whose application decides which partitions it reads and from where.

    Delivery is at-least-once like :class:`~tubemq_aio.consumer.Consumer`: a batch not acked
    within ``confirm_timeout`` (the protection timeout) is taken back and delivered again.

    The constructor takes keyword configuration, as aiokafka's consumer does (the public
    convention of asyncio clients): each keyword is a :class:`ConsumerConfig` field, collected
    into that frozen value; ``config=`` hands the whole value instead.

    Args:
        masters: master addresses (``"h1:8715,h2:8715"`` or a list); ignored with ``config``.
        group: the consumer group.
        topics: topic names, or a mapping ``topic -> set of msgType filters``.
        source_count: how many clients the application runs for this group (≤ 0: undeclared).
        node_id: this client's index in ``[0, source_count - 1]``.
        consume_from: where a partition without a stored group offset starts when connected
            with ``offset=None``: ``"latest"`` (default), ``"earliest"`` or ``"latest_always"``.
        reassign_interval: seconds between automatic re-assignments (``None``: off, the
            application connects partitions itself): every period a task of the consumer lists
            the partitions, works out this node's share with ``assignor``, connects the new
            ones (at the group's stored offset) and disconnects those no longer assigned.
        assignor: picks this node's partitions for the automatic re-assignment.
        config: a complete :class:`ConsumerConfig` instead of ``masters``/``group``/``topics``.
        on_assigned: called with the keys of partitions :meth:`connect` (or the automatic
            re-assignment) just connected; an ``async def`` is awaited, bounded by
            ``callback_timeout``; an exception is logged.
        on_revoked: called (or awaited) with the keys of partitions about to be released: by
            :meth:`disconnect`, the re-assignment, a partition no longer subscribable, and by
            :meth:`close` with every partition still connected. A partition lost with its
            broker is re-connected without either call.
        **options: further :class:`ConsumerConfig` fields (``confirm_timeout``,
            ``heartbeat_interval``, ``fetchers``, ...).

    Raises:
        ClientBalanceConfigError: ``node_id`` is out of range.
        ConfigError: another argument is invalid.

    Example::

        async with ClientBalancedConsumer("127.0.0.1:8715", group="g", topics=["demo"],
                                          source_count=2, node_id=0) as c:
            for key in assign_modulo(await c.partitions(), 2, 0):
                await c.connect(key)
            async for msg in c:
                print(msg.body)
    """

    def __init__(
        self,
        masters: str | Iterable[str] | None = None,
        *,
        group: str = "",
        topics: TopicsArg = (),
        source_count: int = 0,
        node_id: int = 0,
        consume_from: ConsumeFrom | datetime = "latest",
        reassign_interval: float | None = None,
        assignor: Assignor = assign_modulo,
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
        self.source_count = source_count
        self.node_id = node_id
        self._wire_node = validate_node(source_count, node_id)
        #: connect/disconnect/positioned reads of one partition in turn (the broker keeps one
        #: read cursor per group and partition); different partitions run at once.
        self._locks: KeyedLocks[PartitionKey] = KeyedLocks()
        checks = Checks(type(self).__name__)
        checks.optional_seconds("reassign_interval", reassign_interval)
        if not callable(assignor):
            checks.problem(f"assignor must be callable, got {type(assignor).__name__}")
        checks.done()
        self._reassign = (reassign_interval, assignor)
        #: Partitions the application connected and has not disconnected (re-connected by
        #: :meth:`_reconnect` after a broker failure drops them).
        self._wanted: set[PartitionKey] = set()
        self._reconnecting: set[PartitionKey] = set()
        #: Partitions already started at ``consume_from``'s time in this process.
        self._time_started: set[str] = set()

    _task_prefix = "tubemq-cb-consumer"

    @classmethod
    def from_url(cls, url: str, **options: Unpack[ClientBalancedUrlOptions]) -> Self:
        """Build a client-balanced consumer from ``tubemq://…`` (see
        :meth:`~tubemq_aio.config.ClientConfig.from_url`) and the constructor's keywords
        (``group=``, ``topics=``, ``source_count=``, ...).

        Raises:
            ConfigError: the URL or an option is invalid.
        """
        return cls._from_url(url, options)

    def __repr__(self) -> str:
        return (
            f"<ClientBalancedConsumer group={self.config.group} node={self.node_id}/"
            f"{self.source_count} {self._state()} connected={len(self._leases)}>"
        )

    # ---- life cycle --------------------------------------------------------------------------

    def _open(self) -> tuple[ConsumerWiring, ClientBalanceSession]:
        parts = self._wire("Balance")
        session = ClientBalanceSession(self.config, *self._wire_node, parts)
        session.on_unsubscribable = self._on_unsubscribable
        session.on_lost = self._on_lost
        return parts, session

    def _spawn_workers(self, session: ClientBalanceSession, engine: FetchEngine) -> None:
        self._spawn(session.heartbeat_loop(), "master-heartbeat")
        self._spawn(self._release_unsure_loop(session), "release-unsure")
        super()._spawn_workers(session, engine)

    async def _before_cancel(self, session: ClientBalanceSession) -> None:
        session.stopping = True  # close unregisters what is unsure: no retry left for later

    async def _release_unsure_loop(self, session: ClientBalanceSession) -> None:
        # A connect or positioned read whose register timed out, or a disconnect whose
        # unregister did, may leave the partition registered at its broker for this consumer:
        # unregistered once that call had its rpc_timeout there, so another member can take
        # it (docs/consumer.md). Checked every second, as the server-balanced consumer does.
        while True:
            await asyncio.sleep(_UNSURE_CHECK_INTERVAL)
            settled = session.settled_unsure()
            await asyncio.gather(*(self._release_settled(session, key) for key in settled))

    async def _release_settled(self, session: ClientBalanceSession, key: PartitionKey) -> None:
        async with self._locks.hold(key):  # no connect of it runs meanwhile
            await session.release_settled_unsure([key])

    def _on_started(self) -> None:
        # The re-assignment calls partitions()/connect(), which refuse a consumer still
        # starting: spawned from _start, its first round failed and waited a whole period.
        period, assignor = self._reassign
        if period is not None:
            self._spawn(keep_assigned(self, period, assignor), "reassign")

    def _on_unsubscribable(self, keys: list[PartitionKey]) -> None:
        log.info("partitions %s are no longer subscribable; disconnecting", [str(k) for k in keys])
        for key in keys:
            self._spawn(self._drop_unsubscribable(key), f"drop-{key}")

    async def _drop_unsubscribable(self, key: PartitionKey) -> None:
        if key in self._leases:
            await self._notify_revoked([key.format()])
            if self.closed:
                return  # the callback closed the consumer: its close releases the partition
        await self._disconnect_key(key)

    def _on_lost(self, keys: list[PartitionKey]) -> None:
        self.stats.partitions_lost += len(keys)
        log.warning(
            "lost partitions %s with their broker; re-connecting them", [str(k) for k in keys]
        )
        for key in keys:
            if key in self._wanted and key not in self._reconnecting:
                self._reconnecting.add(key)
                self._spawn(self._reconnect(key), f"reconnect-{key}")

    async def _reconnect(self, key: PartitionKey) -> None:
        # Until connected again, disconnected by the application, or closed (cancelled).
        delay, cap = self.config.reconnect_delay, self.config.reconnect_delay_max
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)
                async with self._locks.hold(key):
                    if key not in self._wanted or key in self._leases:
                        return
                    try:
                        await self._register(key.format(), key, None)
                    except (TubeMQError, OSError) as exc:
                        log.info("re-connect of %s failed: %r; retrying", key, exc)
                        continue
                self.stats.partitions_reconnected += 1
                log.warning("re-connected lost partition %s", key)
                return
        finally:
            self._reconnecting.discard(key)

    async def _release_all(self, session: ClientBalanceSession) -> None:
        keys = dict.fromkeys([*session.held(), *session.unsure])
        await asyncio.gather(*(session.release(k) for k in keys))

    # ---- partitions --------------------------------------------------------------------------

    async def partitions(self) -> list[PartitionMeta]:
        """Query the master for the partitions of the subscribed topics (``GetPartMeta``).

        Returns:
            Every configured partition on a known broker, sorted by key.

        Raises:
            ClientClosedError: the consumer is closed or not started.
            ServerError: the master refused the query.
        """
        session, _ = self._running()
        await session.query_meta()
        return [PartitionMeta.of(m) for _, m in sorted(session.cache.metas.items())]

    async def connect(self, partition_key: str, offset: int | None = None) -> PartitionPosition:
        """Register a partition at its broker and start fetching it.

        Args:
            partition_key: ``brokerId:topic:partitionId`` from :meth:`partitions`.
            offset: None continues from the group's stored offset (or ``consume_from`` when
                the group has none; a ``consume_from`` time applies to the first connect of
                the partition in this process, whatever the group stored); an index offset
                ≥ 0 (one the server returned, e.g. a ``positions()`` or
                :meth:`offsets_for_times` value) makes the group start there (clamped to the
                partition).

        Returns:
            The partition's position right after the registration.

        Raises:
            UnknownPartitionError: the key is malformed, unknown, or of an unsubscribed topic.
            PartitionAlreadyConnectedError: this consumer already holds it.
            PartitionNotSubscribableError: the group may not subscribe to it now.
            ClientBalanceConfigError: ``offset`` is negative.
            ServerError: the broker refused (e.g. ``PartitionOccupiedError``: another member
                holds it).
        """
        validate_bootstrap_offset(offset)
        when = self.config.start_time
        if offset is None and when is not None and partition_key not in self._time_started:
            # consume_from=datetime: the first connect of a partition in this process starts
            # at the time (docs/protocol/time.md §4); the search reads with this group.
            found = await search_offset(self, partition_key, when, self.config.msg_time_zone)
            offset = found.offset
            self._time_started.add(partition_key)
        key = parse_key(partition_key)
        async with self._locks.hold(key):
            await self._register(partition_key, key, offset)
            self._wanted.add(key)
            position = self._position(key)
        # Outside the lock: the callback may connect or disconnect partitions itself.
        await self._notify_assigned([key.format()])
        return position

    async def _register(self, partition_key: str, key: PartitionKey, offset: int | None) -> None:
        # Under the partition's lock: register at the broker and start fetching.
        session, engine = self._running()
        partition = await resolve_partition(session, partition_key, key)
        if key in self._leases:
            raise PartitionAlreadyConnectedError(f"partition {partition_key} is connected")
        session.readers.pop(key, None)  # a reader registration is replaced
        rsp = await session.register_at_broker(partition, offset)
        if not rsp.success:
            raise server_error(rsp.err_code, rsp.err_msg)
        # Registered at its end: a fetch now would answer "no new data", so the register counts
        # as that answer: the first fetch waits msg_not_found_wait and the idle back-off goes
        # on from there (one request less per connect).
        at_end = 0 <= rsp.max_offset <= rsp.curr_offset
        delay_ms = round(self.config.msg_not_found_wait * 1000) if at_end else 0
        now = session.clock()
        self._leases.add(
            partition,
            now,
            curr_offset=rsp.curr_offset,
            max_offset=rsp.max_offset,
            delay_ms=delay_ms,
        )
        if at_end:
            engine.count_empty(key)
        engine.notify(now + delay_ms / 1000 if delay_ms > IMMEDIATE_RELEASE_MS else None)
        # DEBUG: at thousands of partitions one INFO line each would cost more than the rest.
        log.debug("connected %s at offset %d (max %d)", key, rsp.curr_offset, rsp.max_offset)

    async def disconnect(self, partition_key: str) -> None:
        """Stop fetching a partition and unregister it at its broker.

        Waits up to ``rebalance_confirm_wait`` (3 s) for a batch of it held by the application
        to be acked; an acked last batch is committed, an unacked one rolled back (its messages
        come again to whoever connects the partition next).

        Raises:
            UnknownPartitionError: the key is malformed.
            PartitionNotConnectedError: this consumer does not hold it.
        """
        key = parse_key(partition_key)
        session, _ = self._running()
        known = (self._leases, session.readers, self._wanted, session.unsure)
        if all(key not in held for held in known):
            raise PartitionNotConnectedError(f"partition {partition_key} is not connected")
        if key in self._leases:
            await self._notify_revoked([key.format()])
        async with self._locks.hold(key):
            await self._disconnect_key(key)

    async def _disconnect_key(self, key: PartitionKey) -> None:
        # Wait like Java (3000 ms, docs/protocol/consumer.md §8.4) for a batch the application
        # holds, then unregister.
        self._wanted.discard(key)
        session, _ = self._running()
        await session.await_return([key], session.clock() + self.config.rebalance_confirm_wait)
        await session.release(key)

    # ---- consuming ---------------------------------------------------------------------------

    async def fetch(
        self, *, max_records: int | None = None, timeout: float | None = None
    ) -> MessageBatch:
        """Alias of :meth:`getmany`: the next batch of any connected partition with data."""
        return await self.getmany(max_records=max_records, timeout=timeout)

    # ---- positioned reads --------------------------------------------------------------------

    async def read_at(self, partition_key: str, offset: int) -> PositionedRead:
        """Read the one broker batch that starts exactly at ``offset`` (exact replay).

        The partition must not be connected for fetching; it is registered at its broker for
        positioned reads (and released by :meth:`disconnect`, :meth:`connect` or close). Call
        sequence (see ``docs/client-balanced-consumer.md``): register with ``currOffset =
        offset``, GetMessage with ``lastPackConsumed=false`` (the answer's ``currOffset`` is
        the batch start), then commit, whose answer is the offset right after the batch. The
        group's stored offset is left at ``next_offset``.

        Reads (and connects, disconnects) of different partitions run at once; of the same
        partition, one after the other in the order called (one lock per partition).

        Args:
            partition_key: ``brokerId:topic:partitionId``.
            offset: an index offset ≥ 0 previously returned by the server.

        Returns:
            The batch with its start offset, the offset after it and the max offset.

        Raises:
            UnknownPartitionError / PartitionNotSubscribableError: as for :meth:`connect`.
            PartitionAlreadyConnectedError: the partition is connected for fetching.
            ClientBalanceConfigError: ``offset`` is negative or None.
            ConsumeSpeedLimitedError: the broker throttles the group (452); read again later
                (an empty result always means "no message from ``offset`` on").
            ServerError: a broker call failed.
        """
        return await self._positioned("read_at", partition_key, offset, consume=True)

    async def read_next(self, partition_key: str, offset: int) -> PositionedRead:
        """Like :meth:`read_at`, for the batch right after one this consumer just read: the
        previous read left the broker's cursor at ``offset`` (its ``next_offset``), so the
        register is skipped (GetMessage + commit only).

        The answer is checked: a batch that does not start at ``offset`` is rolled back and
        read again with :meth:`read_at`'s sequence, as is any answer but a batch. The batch
        boundaries may differ from :meth:`read_at`'s (the broker's first read after a
        register uses a smaller unit); the messages at each offset are the same.

        Raises:
            The same errors as :meth:`read_at`.
        """
        return await self._positioned(
            "read_next", partition_key, offset, consume=True, sequential=True
        )

    async def peek_at(self, partition_key: str, offset: int) -> PositionedRead:
        """Like :meth:`read_at`, but the batch is rolled back instead of committed: the group's
        stored offset stays at ``offset`` (never moves past it) and ``next_offset`` is unknown
        (returned equal to ``start_offset``). For finding the first message at an offset.

        Raises:
            The same errors as :meth:`read_at`.
        """
        return await self._positioned("peek_at", partition_key, offset, consume=False)

    async def offset_bounds(self, partition_key: str) -> tuple[int, int]:
        """The partition store's ``(min_offset, max_offset)`` now, from one broker register at
        offset 0 (the broker clamps it to the min and reports the max), then an unregister.

        Sets this consumer's group offset for the partition to its min; meant for a group used
        only for planning. The partition must not be connected by this consumer.

        Raises:
            UnknownPartitionError / PartitionNotSubscribableError: as for :meth:`connect`.
            PartitionAlreadyConnectedError: the partition is connected for fetching.
            ServerError: the broker refused the register.
        """
        session, _ = self._running()
        key = parse_key(partition_key)
        async with self._locks.hold(key):
            partition = await resolve_partition(session, partition_key, key)
            if partition.key in self._leases:
                raise PartitionAlreadyConnectedError(f"partition {partition_key} is connected")
            session.readers.pop(partition.key, None)
            rsp = await session.register_at_broker(partition, 0)
            if not rsp.success:
                raise server_error(rsp.err_code, rsp.err_msg)
            await session.unregister_at_broker(partition, 0)
            return rsp.curr_offset, rsp.max_offset

    async def offsets_for_times(
        self, times: Mapping[str, datetime], *, timeout: float | None = None
    ) -> dict[str, int | None]:
        """For each partition, the earliest offset from which its messages are stamped at or
        after the given time (Kafka's ``offsets_for_times``); ``None`` when none is.

        The time a message carries is its producer's ``msg_time`` (``yyyyMMddHHmm``, one
        minute, in ``msg_time_zone``); the broker's store time is not readable by clients.
        A time inside a minute counts from that minute's start. The search bisects the
        partition's index offsets with positioned reads (register + GetMessage + commit each):
        one read when the time is before the oldest kept message, about
        ``log2(messages in the store)`` otherwise, fewer with large batches. Up to
        ``time_search_concurrency`` partitions (8) are searched at once. Details and the
        measured cost: ``docs/protocol/time.md``.

        Reads go through this consumer's group: each searched partition's stored group offset
        is left where the last read ended (connect with the answer, or search with a group
        used only for planning), and the partitions are unregistered again afterwards.

        Args:
            times: ``{partition key: timezone-aware datetime}``.
            timeout: seconds the whole search may take (default ``time_search_timeout``,
                60 s).

        Returns:
            ``{partition key: offset or None}``; pass an offset to :meth:`connect` or
            :meth:`read_at`.

        Raises:
            ConsumerConfigError: a naive datetime, a non-string key, not a mapping.
            UnknownPartitionError / PartitionNotSubscribableError: as for :meth:`connect`.
            PartitionAlreadyConnectedError: a partition is connected for fetching.
            RequestTimeoutError: the search took longer than ``timeout``.
            ServerError: a broker refused a read.
        """
        wanted = check_times(times)
        limit = self.config.time_search_timeout if timeout is None else timeout
        check_search_timeout(limit, ClientBalanceConfigError)
        found = await self.search_times(wanted, limit)
        return {key: None if f.past_end else f.offset for key, f in found.items()}

    async def search_times(
        self, times: Mapping[str, datetime], timeout: float
    ) -> dict[str, TimeOffset]:
        """:meth:`offsets_for_times` with the whole answer of each search (the offset to
        start at even past the end, and the number of reads); for tools and the Spark source.

        Raises:
            The errors of :meth:`offsets_for_times`.
        """
        wanted = check_times(times)
        session, _ = self._running()
        before = set(session.readers)
        cfg = self.config
        try:
            return await search_offsets(
                self, wanted, cfg.msg_time_zone, timeout, cfg.time_search_concurrency
            )
        finally:
            # Only the partitions searched: another task may read other partitions meanwhile.
            added = [k for k in _keys_of(wanted) if k in session.readers and k not in before]
            await asyncio.gather(*(self._release_reader(session, k) for k in added))

    async def _release_reader(self, session: ClientBalanceSession, key: PartitionKey) -> None:
        async with self._locks.hold(key):
            if key in session.readers:
                await session.release(key)

    async def read_with(
        self,
        codec: BatchCodec[A, T],
        partition_key: str,
        offset: int,
        *,
        sequential: bool = False,
        consume: bool = True,
    ) -> BatchRead[T]:
        """:meth:`read_at` (or :meth:`read_next` with ``sequential``, :meth:`peek_at` without
        ``consume``) with the answer parsed and decoded by ``codec`` instead of into
        :class:`~tubemq_aio.models.Message` objects (the Spark source decodes into columns).

        Raises:
            ClientBalanceConfigError: ``codec`` is not a :class:`BatchCodec` (checked before
                any I/O, so no batch is consumed and then lost to a failing decode).
            The same errors as :meth:`read_at`.
        """
        return await self._read("read_with", codec, partition_key, offset, sequential, consume)

    async def _read(
        self,
        call: str,
        codec: BatchCodec[A, T],
        partition_key: str,
        offset: int,
        sequential: bool,
        consume: bool,
    ) -> BatchRead[T]:
        """:meth:`read_with`, its arguments checked in the name of ``call``, the public method
        the caller used (``read_at``, ``read_next``, ``peek_at`` or ``read_with``)."""
        checks = Checks(call, error=ClientBalanceConfigError)
        checks.instance("codec", codec, BatchCodec)
        checks.integer("offset", offset, low=0, high=2**63 - 1)  # an int64 on the wire
        checks.done()
        session, _ = self._running()
        key = parse_key(partition_key)
        async with self._locks.hold(key):
            partition = await resolve_partition(session, partition_key, key)
            if key in self._leases:
                raise PartitionAlreadyConnectedError(
                    f"partition {partition_key} is connected for fetching; disconnect it first"
                )
            return await read_batch(
                session,
                ReadAt(partition, offset, consume, sequential),
                codec,
                filters=self.config.filters_of(key.topic),
                stats=self.stats,
                deliver_corrupt=self.config.deliver_corrupt,
            )

    async def _positioned(
        self, call: str, partition_key: str, offset: int, *, consume: bool, sequential: bool = False
    ) -> PositionedRead:
        got = await self._read(call, MESSAGES, partition_key, offset, sequential, consume)
        return PositionedRead(
            got.partition_key, got.items, got.start_offset, got.next_offset, got.max_offset
        )


def _keys_of(texts: Iterable[str]) -> list[PartitionKey]:
    """The well-formed partition keys among ``texts`` (a malformed one was refused already)."""
    keys = []
    for text in texts:
        try:
            keys.append(parse_key(text))
        except UnknownPartitionError:
            continue
    return keys
