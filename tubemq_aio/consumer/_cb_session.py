"""Master and broker side of the client-balanced consumer (docs/protocol/consumer.md §8).

The master only tracks membership, metadata and flow control for a client-balanced group: the
V2 register (method 20) and heartbeat (21) carry ``ClientSubRepInfo``/``OpsTaskInfo``, metadata
comes from ``GetPartMeta`` (22), and the master never sends rebalance events. Partitions are
registered at their brokers on the application's request, with an optional bootstrap offset.
Decisions come from :mod:`tubemq_aio.protocol.client_balance`; this module performs the I/O.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable

from tubemq_aio._client import auth_stamp, wall_ms
from tubemq_aio.consumer._cb_max_offset import reset_to_max_offsets
from tubemq_aio.consumer._session_base import ConsumerWiring, SessionBase
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import ConnectError, RequestNotSentError, TubeMQError, server_error
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol.client_balance import (
    BalanceClient,
    OpsTaskIds,
    PartitionMetaCache,
    SubscriptionReport,
    SubscriptionReporter,
    build_get_part_meta,
    build_heartbeat_v2,
    build_register_v2,
    format_part_sub_info,
)
from tubemq_aio.protocol.consumer_meta import (
    BrokerInfo,
    Partition,
    PartitionKey,
    ReadStatus,
    TopicCondition,
)
from tubemq_aio.protocol.max_offset_ctrl import MaxOffsetControl
from tubemq_aio.protocol.retry import DEFAULT_RETRY
from tubemq_aio.protocol.rpc import Method

__all__ = ["ClientBalanceSession"]

log = logging.getLogger("tubemq_aio.consumer")

#: A connect the broker answered 410 is tried once more this much later (stale holder, §8.4).
_OCCUPIED_RETRY_WAIT = 1.0


class ClientBalanceSession(SessionBase):
    """Master-side life of one client-balanced consumer, plus its broker registrations.

    Args:
        config: the consumer configuration.
        source_count: the declared number of clients (already validated, -2 = undeclared).
        node_id: this client's index (already validated, -2 = undeclared).
        parts: the consumer's connected parts (see ``wire_consumer``).
    """

    #: Bad node id, source count / node id conflicts, topic not deployed (§8.5).
    register_final_codes = frozenset({400, 429, 430, 431})

    def __init__(
        self, config: ConsumerConfig, source_count: int, node_id: int, parts: ConsumerWiring
    ) -> None:
        super().__init__(config, parts)
        self.source_count = source_count
        self.node_id = node_id
        self.cache = PartitionMetaCache(tls=parts.tls)
        self.reporter = SubscriptionReporter(10 * config.subscription_report_interval)
        #: The master's "consume from the max offset" control (§8.2).
        self.max_offset_ctrl = MaxOffsetControl()
        #: Partitions registered at their broker for positioned reads only (not fetched).
        self.readers: dict[PartitionKey, Partition] = {}
        self.on_unsubscribable: Callable[[list[PartitionKey]], object] | None = None
        #: Called with the fetched partitions dropped after a failed broker heartbeat.
        self.on_lost: Callable[[list[PartitionKey]], object] | None = None

    def __repr__(self) -> str:
        return f"<ClientBalanceSession {self.client_id} {self.cache!r} {self.leases!r}>"

    def held(self) -> list[PartitionKey]:
        """Every partition registered at a broker by this client (fetching or reading)."""
        return [*self.leases.keys(), *self.readers]

    def _apply(self, rsp: consumer_replies.MasterResponse) -> bool:
        self._apply_auth_and_flow(rsp)
        return self.cache.update(
            broker_config_id=rsp.broker_config_id,
            broker_config_list=rsp.broker_config_list,
            topic_meta_id=rsp.topic_meta_id,
            topic_meta_list=rsp.topic_meta_list,
            wall_ms=wall_ms(),
        )

    # ---- master RPCs -------------------------------------------------------------------------

    async def register_once(self, deadline: float | None = None) -> consumer_replies.MasterResponse:
        """One ``RegisterRequestC2MV2`` reporting the held partitions; applies the answer."""
        cfg = self.config
        held = self.held()
        body = build_register_v2(
            client=BalanceClient(
                self.client_id, cfg.group, self.host_name, self.source_count, self.node_id
            ),
            topics=list(cfg.topics),
            topic_conditions=[TopicCondition(t, f).format() for t, f in cfg.topics.items() if f],
            report=self._report(tuple(format_part_sub_info(held)) if held else None),
            ops=OpsTaskIds(self.flow),
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        data = await self.invoker.call(Method.MASTER_CONSUMER_REGISTER_V2, body, deadline=deadline)
        rsp = consumer_replies.parse_master_response(Method.MASTER_CONSUMER_REGISTER_V2, data)
        if rsp.success:
            self.max_offset_ctrl.registered(wall_ms())
            self._apply(rsp)
        return rsp

    async def query_meta(self, deadline: float | None = None) -> None:
        """``GetPartMetaRequestC2M`` (§8.3); re-registers once on 411. The masters are tried
        in rounds until ``deadline`` (:attr:`clock` time; default ``rpc_timeout`` from now; one
        already passed makes one round).

        Raises:
            ServerError: the master refused the query.
            TubeMQError: no master answered by ``deadline``.
        """
        for _ in range(2):
            body = build_get_part_meta(
                client_id=self.client_id,
                group=self.config.group,
                broker_config_id=self.cache.broker_config_id,
                topic_meta_id=self.cache.topic_meta_id,
                auth=self.tokens.heartbeat_auth(*auth_stamp()),
            )
            data = await self.invoker.call(
                Method.MASTER_CONSUMER_GET_PART_META, body, deadline=deadline
            )
            rsp = consumer_replies.parse_master_response(Method.MASTER_CONSUMER_GET_PART_META, data)
            if rsp.success:
                self._apply(rsp)
                return
            if rsp.err_code != 411:
                raise server_error(rsp.err_code, rsp.err_msg)
            await self.register()
        raise server_error(411, "not registered at the master")

    def _report(self, part_sub_info: tuple[str, ...] | None) -> SubscriptionReport:
        """The ``subRepInfo`` of a register or heartbeat: the ids held and ``part_sub_info``."""
        cache = self.cache
        return SubscriptionReport(
            cache.broker_config_id, cache.topic_meta_id, cache.assigned_time_ms, part_sub_info
        )

    # ---- master heartbeat --------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        """V2 heartbeat every ``heartbeat_interval`` (§8.2), plus the protection timeout."""
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            try:
                await self.heartbeat_once()
            except Exception:  # a bug must not end the session silently
                log.exception("master heartbeat round failed")

    async def heartbeat_once(self) -> None:
        """One ``HeartRequestC2MV2``; 411 re-registers, new meta drops unsubscribable holds."""
        self.expire_unconfirmed()
        cache = self.cache
        reported = self.reporter.next(self.held())
        body = build_heartbeat_v2(
            client_id=self.client_id,
            group=self.config.group,
            report=self._report(None if reported is None else tuple(reported)),
            ops=OpsTaskIds(self.flow, self.max_offset_ctrl.ctrl_id),
            auth=self.tokens.heartbeat_auth(*auth_stamp()),
        )
        try:
            data = await self.invoker.call(Method.MASTER_CONSUMER_HEARTBEAT_V2, body)
            rsp = consumer_replies.parse_master_response(Method.MASTER_CONSUMER_HEARTBEAT_V2, data)
        except TubeMQError as exc:
            log.warning("master heartbeat failed: %r", exc)
            return
        if rsp.success:
            if self._apply(rsp):
                gone = cache.unsubscribable(self.held())
                if gone and self.on_unsubscribable is not None:
                    self.on_unsubscribable(gone)
            self.max_offset_ctrl.observe(rsp.flow.max_offset_ctrl_id)
            if self.max_offset_ctrl.take():
                await self.reset_to_max()
        elif rsp.err_code == 411:
            try:
                await self.register_once()
            except TubeMQError as exc:
                log.warning("re-register after 411 failed: %r", exc)
        else:
            log.warning("master heartbeat: [%d] %s", rsp.err_code, rsp.err_msg)

    async def reset_to_max(self) -> list[PartitionKey]:
        """Carry out the master's "consume from the max offset" control now: every fetched
        partition restarts at its last known max offset (:mod:`._cb_max_offset`); partitions
        the broker says are no longer ours are dropped as lost. Returns those moved."""
        moved, lost = await reset_to_max_offsets(self)
        if lost:
            self._drop(lost)
        return moved

    # ---- broker registrations ----------------------------------------------------------------

    async def register_at_broker(
        self, partition: Partition, offset: int | None, deadline: float | None = None
    ) -> consumer_replies.OffsetResponse:
        """``RegisterRequestC2B`` opType 31 with a bootstrap offset (§8.4), tried again 1 s
        later on 410 (the broker dropped an expired holder with that answer).

        A register that certainly did not reach the broker (no connection, or lost before it
        was written) is tried again after a pause until ``deadline`` (:attr:`clock` time;
        default ``rpc_timeout`` from now) has passed, so a broker
        restarting costs time, not a :class:`~tubemq_aio.errors.ConnectError` in milliseconds
        (issue 30, fault 1). ``offset`` None keeps the group's stored offset (moved back to
        the store's end when it lies beyond it, and for a partition this consumer fetched
        before, moved back to the newest message it read that the broker still stores:
        :meth:`resume_stored`); see
        :meth:`read_status`.

        Raises:
            ConnectError / RequestNotSentError: the broker could not be reached in that time.
            TubeMQError: any other transport error (e.g. a written register without answer).
        """
        key = partition.key
        status = self.read_status(key, offset)
        if deadline is None:
            deadline = self.clock() + self.config.rpc_timeout
        failures = 0
        occupied = False
        while True:
            try:
                rsp = await self.broker.register(
                    partition,
                    read_status=status,
                    filters=self.config.filters_of(key.topic),
                    curr_offset=offset,
                )
                if offset is None:  # the stored offset: beyond a lost tail or replaced messages?
                    rsp = await self.resume_stored(partition, rsp, stored=True)
            except (ConnectError, RequestNotSentError):
                failures += 1
                pause = DEFAULT_RETRY.pause(
                    failures,
                    self.clock(),
                    deadline,
                    random.random(),
                    at_least=self.broker.rpc.retry_in(partition.broker),
                )
                if pause is None:
                    raise
                await asyncio.sleep(pause)
                continue
            except BaseException as exc:
                self.note_register_end(partition, exc)
                raise
            self.note_register_end(partition, None)
            self.cache.record_connect_result(
                key, 200 if rsp.success else rsp.err_code, self.clock()
            )
            if rsp.success or rsp.err_code != 410 or occupied:
                return rsp
            occupied = True
            await asyncio.sleep(_OCCUPIED_RETRY_WAIT)

    async def release(self, key: PartitionKey) -> None:
        """Remove a fetched partition locally (rolling back a batch still out) and unregister;
        what was read of it is forgotten (another reader may read on before it comes back).
        An unregister without answer is sent again later like an unsure register's
        (:meth:`_release_later`)."""
        self.engine.forget([key])
        self.tail.forget(key)
        held: list[tuple[Partition, int]] = []
        removed = self.leases.remove(key)
        if removed is not None:
            held.append((removed.partition, removed.read_status))
        reader = self.readers.pop(key, None)
        if reader is not None:
            # Positioned reads commit every batch they return; nothing is in flight.
            held.append((reader, ReadStatus.NORMAL))
        unanswered = [(p, rs) for p, rs in held if not await self.unregister_at_broker(p, rs)]
        await self.release_unsure(key)
        for partition, read_status in unanswered:
            self._release_later(partition, read_status)

    # ---- broker heartbeat --------------------------------------------------------------------

    def held_by_broker(self) -> dict[BrokerInfo, list[Partition]]:
        """Every partition registered at a broker by this client (fetching or reading)."""
        groups = self.leases.by_broker()
        for partition in self.readers.values():
            groups.setdefault(partition.broker, []).append(partition)
        return groups

    def _drop(self, keys: Iterable[PartitionKey]) -> None:
        keys = list(keys)
        fetched = [k for k in keys if k in self.leases]
        super()._drop(keys)
        if fetched and self.on_lost is not None:
            self.on_lost(fetched)

    def forget_held(self, key: PartitionKey) -> bool:
        """Remove ``key`` from the fetched or read partitions, without unregistering."""
        self.unsure.pop(key, None)
        return self.leases.remove(key) is not None or self.readers.pop(key, None) is not None
