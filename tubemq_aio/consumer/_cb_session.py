"""Master and broker side of the client-balanced consumer (protocol notes §8).

The master only tracks membership, metadata and flow control for a client-balanced group: the
V2 register (method 20) and heartbeat (21) carry ``ClientSubRepInfo``/``OpsTaskInfo``, metadata
comes from ``GetPartMeta`` (22), and the master never sends rebalance events. Partitions are
registered at their brokers on the application's request, with an optional bootstrap offset.
Decisions come from :mod:`tubemq_aio.protocol.client_balance`; this module performs the I/O.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from tubemq_aio._client import auth_stamp, wall_ms
from tubemq_aio.auth import TokenState
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import TubeMQError, server_error
from tubemq_aio.master import MasterInvoker
from tubemq_aio.protocol import consumer_rpc as rpc
from tubemq_aio.protocol.client_balance import (
    PartitionMetaCache,
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
from tubemq_aio.protocol.flow_control import FlowControlState, FlowRuleError
from tubemq_aio.protocol.partitions import PartitionLeases
from tubemq_aio.protocol.rpc import Method

__all__ = ["ClientBalanceSession"]

log = logging.getLogger("tubemq_aio.consumer")

#: Java ``regFailWaitPeriodMs`` (§1.3), seconds between register attempts.
_REGISTER_FAIL_WAIT = 1.0
#: A connect is tried twice, 1 s apart, when the broker says 410 (stale holder, §8.4).
_CONNECT_ATTEMPTS = 2
_CONNECT_RETRY_WAIT = 1.0


class ClientBalanceSession:
    """Master-side life of one client-balanced consumer, plus its broker registrations.

    Args:
        config: the consumer configuration.
        source_count: the declared number of clients (already validated, -2 = undeclared).
        node_id: this client's index (already validated, -2 = undeclared).
        invoker: master RPCs with fail-over.
        broker: broker RPCs.
        engine: the fetch engine.
        leases: partitions connected for fetching.
        flow: flow-control state.
        tokens: authentication tokens.
        host_name: the local address reported to the master.
        clock: monotonic seconds.
        tls: whether broker ports are TLS ports (blank ports in the broker list).
    """

    def __init__(
        self,
        config: ConsumerConfig,
        source_count: int,
        node_id: int,
        invoker: MasterInvoker,
        broker: BrokerRpc,
        engine: FetchEngine,
        leases: PartitionLeases,
        flow: FlowControlState,
        tokens: TokenState,
        host_name: str,
        clock: Callable[[], float],
        *,
        tls: bool = False,
    ) -> None:
        self.config = config
        self.source_count = source_count
        self.node_id = node_id
        self.invoker = invoker
        self.broker = broker
        self.engine = engine
        self.leases = leases
        self.flow = flow
        self.tokens = tokens
        self.host_name = host_name
        self.clock = clock
        self.client_id = broker.client_id
        self.cache = PartitionMetaCache(tls=tls)
        self.reporter = SubscriptionReporter()
        #: Partitions registered at their broker for positioned reads only (not fetched).
        self.readers: dict[PartitionKey, Partition] = {}
        self.on_unsubscribable: Callable[[list[PartitionKey]], object] | None = None

    def __repr__(self) -> str:
        return f"<ClientBalanceSession {self.client_id} {self.cache!r} {self.leases!r}>"

    def held(self) -> list[PartitionKey]:
        """Every partition registered at a broker by this client (fetching or reading)."""
        return [*self.leases.keys(), *self.readers]

    def _apply(self, rsp: rpc.MasterResponse) -> bool:
        self.tokens.apply(rsp.authorization, require_auth=rsp.require_auth)
        try:
            rsp.flow.apply(self.flow)
        except FlowRuleError as exc:
            log.warning("ignoring malformed flow-control rules from the master: %s", exc)
        return self.cache.update(
            broker_config_id=rsp.broker_config_id,
            broker_config_list=rsp.broker_config_list,
            topic_meta_id=rsp.topic_meta_id,
            topic_meta_list=rsp.topic_meta_list,
            wall_ms=wall_ms(),
        )

    # ---- master RPCs -------------------------------------------------------------------------

    async def register_once(self) -> rpc.MasterResponse:
        """One ``RegisterRequestC2MV2`` reporting the held partitions; applies the answer."""
        cfg, cache = self.config, self.cache
        held = self.held()
        body = build_register_v2(
            client_id=self.client_id,
            group=cfg.group,
            host_name=self.host_name,
            source_count=self.source_count,
            node_id=self.node_id,
            topics=list(cfg.topics),
            topic_conditions=[TopicCondition(t, f).format() for t, f in cfg.topics.items() if f],
            broker_config_id=cache.broker_config_id,
            topic_meta_id=cache.topic_meta_id,
            assigned_time_ms=cache.assigned_time_ms,
            part_sub_info=format_part_sub_info(held) if held else None,
            flow=self.flow,
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        data = await self.invoker.call(Method.MASTER_CONSUMER_REGISTER_V2, body)
        rsp = rpc.parse_master_response(Method.MASTER_CONSUMER_REGISTER_V2, data)
        if rsp.success:
            self._apply(rsp)
        return rsp

    async def register(self) -> None:
        """Register at the master, up to ``register_attempts`` times (Java: 5, §8.5).

        Raises:
            ServerError: the master refused every attempt (the last answer's code), at once
                for 400 (bad node id), 429/430 (source count / node id conflict) and 431.
            TubeMQError: the last transport error when no master answered.
        """
        last: TubeMQError | None = None
        for attempt in range(self.config.register_attempts):
            if attempt:
                await asyncio.sleep(_REGISTER_FAIL_WAIT)
            try:
                rsp = await self.register_once()
            except TubeMQError as exc:
                last = exc
                continue
            if rsp.success:
                return
            last = server_error(rsp.err_code, rsp.err_msg)
            if rsp.err_code in (400, 429, 430, 431):  # no retry can fix these
                break
        assert last is not None
        raise last

    async def query_meta(self) -> None:
        """``GetPartMetaRequestC2M`` (§8.3); re-registers once on 411.

        Raises:
            ServerError: the master refused the query.
        """
        for _ in range(2):
            body = build_get_part_meta(
                client_id=self.client_id,
                group=self.config.group,
                broker_config_id=self.cache.broker_config_id,
                topic_meta_id=self.cache.topic_meta_id,
                auth=self.tokens.heartbeat_auth(*auth_stamp()),
            )
            data = await self.invoker.call(Method.MASTER_CONSUMER_GET_PART_META, body)
            rsp = rpc.parse_master_response(Method.MASTER_CONSUMER_GET_PART_META, data)
            if rsp.success:
                self._apply(rsp)
                return
            if rsp.err_code != 411:
                raise server_error(rsp.err_code, rsp.err_msg)
            await self.register()
        raise server_error(411, "not registered at the master")

    async def close_at_master(self) -> None:
        """``CloseRequestC2M`` (§1.5, Java ``shutdown``); errors are logged."""
        body = rpc.build_close(
            client_id=self.client_id,
            group=self.config.group,
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        try:
            await self.invoker.call(Method.MASTER_CONSUMER_CLOSE, body)
        except TubeMQError as exc:
            log.warning("close at the master failed: %r", exc)

    # ---- master heartbeat --------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        """V2 heartbeat every ``heartbeat_interval`` (§8.2), plus the protection timeout."""
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            try:
                await self.heartbeat_once()
            except Exception:  # a bug must not end the session silently
                log.exception("master heartbeat round failed")

    def expire_unconfirmed(self) -> list[PartitionKey]:
        """Take back batches not acked within ``confirm_timeout`` (redelivered later).

        Deviation from Java, which never reclaims for client-balance consumers (§12 item 7):
        the issue asks for a configurable protection timeout.
        """
        expired = self.leases.expire_unconfirmed(self.clock(), self.config.confirm_timeout)
        if expired:
            self.engine.stats.expired += len(expired)
            log.warning("batches of %s were not acked in time; they will be redelivered",
                        [str(k) for k in expired])  # fmt: skip
            self.engine.notify()
        return expired

    async def heartbeat_once(self) -> None:
        """One ``HeartRequestC2MV2``; 411 re-registers, new meta drops unsubscribable holds."""
        self.expire_unconfirmed()
        cache = self.cache
        body = build_heartbeat_v2(
            client_id=self.client_id,
            group=self.config.group,
            broker_config_id=cache.broker_config_id,
            topic_meta_id=cache.topic_meta_id,
            assigned_time_ms=cache.assigned_time_ms,
            part_sub_info=self.reporter.next(self.held()),
            flow=self.flow,
            auth=self.tokens.heartbeat_auth(*auth_stamp()),
        )
        try:
            data = await self.invoker.call(Method.MASTER_CONSUMER_HEARTBEAT_V2, body)
            rsp = rpc.parse_master_response(Method.MASTER_CONSUMER_HEARTBEAT_V2, data)
        except TubeMQError as exc:
            log.warning("master heartbeat failed: %r", exc)
            return
        if rsp.success:
            if self._apply(rsp):
                gone = cache.unsubscribable(self.held())
                if gone and self.on_unsubscribable is not None:
                    self.on_unsubscribable(gone)
        elif rsp.err_code == 411:
            try:
                await self.register_once()
            except TubeMQError as exc:
                log.warning("re-register after 411 failed: %r", exc)
        else:
            log.warning("master heartbeat: [%d] %s", rsp.err_code, rsp.err_msg)

    # ---- broker registrations ----------------------------------------------------------------

    async def register_at_broker(
        self, partition: Partition, offset: int | None
    ) -> rpc.OffsetResponse:
        """``RegisterRequestC2B`` opType 31 with a bootstrap offset (§8.4), tried twice on 410.

        ``offset`` None keeps the group's stored offset (readStatus from ``consume_from`` on the
        first registration in this process); an offset is sent with readStatus 0, because
        readStatus 2 would make the broker ignore it (§3.2).
        """
        key = partition.key
        first = self.leases.book_registration(key)
        status = self.config.position.read_status(first) if offset is None else ReadStatus.NORMAL
        body = rpc.build_broker_register(
            client_id=self.client_id,
            group=self.config.group,
            key=key,
            read_status=status,
            filters=self.config.filters_of(key.topic),
            curr_offset=offset,
            qry_priority_id=self.flow.qry_priority_id,
            auth=self.tokens.broker_auth(),
        )
        rsp = rpc.OffsetResponse(False, 500, "not sent")
        for attempt in range(_CONNECT_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_CONNECT_RETRY_WAIT)
            data = await self.broker.call(partition.broker, Method.BROKER_CONSUMER_REGISTER, body)
            rsp = rpc.parse_offset_response(data)
            self.cache.record_connect_result(
                key, 200 if rsp.success else rsp.err_code, self.clock()
            )
            if rsp.success or rsp.err_code != 410:
                break
        return rsp

    async def unregister_at_broker(self, partition: Partition, read_status: int) -> None:
        """``RegisterRequestC2B`` opType 32; errors are logged (the broker expires it anyway)."""
        try:
            rsp = await self.broker.unregister(partition, read_status=read_status)
        except (TubeMQError, OSError) as exc:
            log.warning("unregister of %s failed: %r", partition.key, exc)
            return
        if not rsp.success:
            log.info("unregister of %s: [%d] %s", partition.key, rsp.err_code, rsp.err_msg)

    async def release(self, key: PartitionKey) -> None:
        """Remove a fetched partition locally (rolling back a batch still out) and unregister."""
        self.engine.forget([key])
        removed = self.leases.remove(key)
        if removed is not None:
            await self.unregister_at_broker(removed.partition, removed.read_status)
        reader = self.readers.pop(key, None)
        if reader is not None:
            # Positioned reads commit every batch they return; nothing is in flight.
            await self.unregister_at_broker(reader, ReadStatus.NORMAL)

    # ---- broker heartbeat --------------------------------------------------------------------

    def _by_broker(self) -> dict[BrokerInfo, list[Partition]]:
        groups = self.leases.by_broker()
        for partition in self.readers.values():
            groups.setdefault(partition.broker, []).append(partition)
        return groups

    async def broker_heartbeat_loop(self) -> None:
        """Heartbeat every broker holding our partitions, every ``heartbeat_interval`` (§3.3)."""
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            groups = self._by_broker()
            try:
                await asyncio.gather(*(self._broker_heartbeat(b, ps) for b, ps in groups.items()))
            except Exception:
                log.exception("broker heartbeat round failed")

    async def _broker_heartbeat(self, broker: BrokerInfo, partitions: list[Partition]) -> None:
        try:
            rsp = await self.broker.heartbeat(broker, partitions)
        except (TubeMQError, OSError) as exc:
            log.warning("heartbeat to broker %s failed: %r; dropping its partitions", broker, exc)
            self._drop(p.key for p in partitions)
            return
        if not rsp.success and rsp.err_code == 415:
            self._drop(p.key for p in partitions)
            return
        self._drop(f.partition.key for f in rsp.failures)

    def _drop(self, keys: Iterable[PartitionKey]) -> None:
        # No unregister: the broker no longer knows us for these (§3.3).
        dropped = [
            k
            for k in keys
            if self.leases.remove(k) is not None or self.readers.pop(k, None) is not None
        ]
        if dropped:
            log.info("broker no longer knows %s; dropped locally", [str(k) for k in dropped])
            self.engine.forget(dropped)
