"""The consumer's master session: register, heartbeats, rebalance worker, broker heartbeats.

All decisions come from the pure state machines of ``tubemq_aio.protocol`` (``EventProcess``,
``MasterHeartbeatState``, ``PartitionLeases``); this module performs their steps
(docs/protocol/consumer.md).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable

from tubemq_aio._client import auth_stamp, wall_ms
from tubemq_aio.consumer._session_base import ConsumerWiring, SessionBase
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol import consumer_rpc as rpc
from tubemq_aio.protocol.consumer_meta import (
    Partition,
    PartitionKey,
    TopicCondition,
)
from tubemq_aio.protocol.event_pacing import EventPacer
from tubemq_aio.protocol.rebalance import (
    AwaitReturn,
    Drop,
    EventProcess,
    HeartbeatVerdict,
    MasterHeartbeatState,
    RebalanceConfig,
    RebalanceQueue,
    Register,
    Report,
    Sleep,
    StopRebalance,
    Unregister,
)
from tubemq_aio.protocol.rpc import Method

__all__ = ["MasterSession"]

log = logging.getLogger("tubemq_aio.consumer")

#: Heartbeats at ``join_heartbeat_interval`` at most this many times: a member the master gives
#: no partition (more members than partitions) then goes back to ``heartbeat_interval``.
JOIN_HEARTBEATS_MAX = 30


class MasterSession(SessionBase):
    """Master-side life of one consumer, plus the rebalance and broker-heartbeat workers.

    Args:
        config: the consumer configuration.
        parts: the consumer's connected parts (see ``wire_consumer``).
    """

    def __init__(self, config: ConsumerConfig, parts: ConsumerWiring) -> None:
        super().__init__(config, parts)
        self.hb_state = MasterHeartbeatState(
            max_report_interval=config.subscription_report_interval,
            max_retries=config.heartbeat_max_retries,
        )
        self.queue = RebalanceQueue()
        self.pacer = EventPacer(config.rebalance_min_interval)
        self._rebalance_wake = asyncio.Event()
        self._heartbeat_wake = asyncio.Event()
        #: Heartbeats sent at ``join_heartbeat_interval`` so far.
        self._join_heartbeats = 0
        self._stopped = asyncio.Event()
        self.session_time_ms = wall_ms()
        #: Bound consumption: the client's belief that the group is not yet allocated (§1.3).
        self.not_allocated = True
        self._bound_offsets = config.bound.partition_offsets if config.bound else {}
        self._bootstrapped: set[PartitionKey] = set()
        #: consume_from=datetime: the offset of each partition's first registration here.
        self.start_offsets: dict[PartitionKey, int] = {}
        self._time_started: set[PartitionKey] = set()
        self.is_paused: Callable[[PartitionKey], bool] = lambda key: False
        #: Awaited with the keys registered by a rebalance event / about to be unregistered.
        self.on_assigned: Callable[[list[str]], Awaitable[None]] | None = None
        self.on_revoked: Callable[[list[str]], Awaitable[None]] | None = None

    def __repr__(self) -> str:
        return f"<MasterSession {self.client_id} {self.hb_state!r} {self.leases!r}>"

    def stop(self) -> None:
        """Ask the rebalance worker to stop after the event in progress."""
        self.stopping = True
        self._stopped.set()
        self._rebalance_wake.set()

    def _subscribe_info(self) -> list[str]:
        return [s.format() for s in self.leases.subscribe_infos(self.client_id, self.config.group)]

    def _apply(self, rsp: consumer_replies.MasterResponse) -> None:
        if rsp.not_allocated is False:  # copied true -> false only (§1.3)
            self.not_allocated = False
        self._apply_auth_and_flow(rsp)

    # ---- master RPCs -------------------------------------------------------------------------

    async def register_once(self, deadline: float | None = None) -> consumer_replies.MasterResponse:
        """Send one ``RegisterRequestC2M`` (with the partitions held) and apply the answer."""
        cfg = self.config
        body = rpc.build_register(
            client=rpc.ConsumerClient(
                self.client_id, cfg.group, self.host_name, self.session_time_ms
            ),
            subscription=rpc.Subscription(
                tuple(cfg.topics),
                tuple(TopicCondition(t, f).format() for t, f in cfg.topics.items() if f),
            ),
            subscribe_info=self._subscribe_info(),
            flow=self.flow,
            bound=cfg.bound.session(not_allocated=self.not_allocated) if cfg.bound else None,
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        data = await self.invoker.call(Method.MASTER_CONSUMER_REGISTER, body, deadline=deadline)
        rsp = consumer_replies.parse_master_response(Method.MASTER_CONSUMER_REGISTER, data)
        if rsp.success:
            self._apply(rsp)
            self.hb_state.on_registered()
        return rsp

    # ---- master heartbeat --------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        """Heartbeat at once, then every ``heartbeat_interval`` (sooner when a result waits)."""
        while True:
            try:
                backoff = await self.heartbeat_once()
            except Exception:  # a bug must not end the session silently
                log.exception("master heartbeat round failed")
                backoff = False
            wait = self.config.heartbeat_retry_backoff if backoff else self._heartbeat_wait()
            self._heartbeat_wake.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._heartbeat_wake.wait()
            except TimeoutError:
                pass

    def _heartbeat_wait(self) -> float:
        """The join heartbeat interval in effect (``ConsumerConfig.join_heartbeat``) until the
        first connect event (at most :data:`JOIN_HEARTBEATS_MAX` times), else
        ``heartbeat_interval``."""
        join = self.config.join_heartbeat
        joining = self.hb_state.first_connect_pending
        if join is not None and joining and self._join_heartbeats < JOIN_HEARTBEATS_MAX:
            self._join_heartbeats += 1
            return min(join, self.config.heartbeat_interval)
        return self.config.heartbeat_interval

    async def heartbeat_once(self) -> bool:
        """One master heartbeat round; True when the failure count demands a back-off."""
        cfg = self.config
        self.expire_unconfirmed()
        report = self.hb_state.next_report()
        body = rpc.build_heartbeat(
            client_id=self.client_id,
            group=cfg.group,
            flow=self.flow,
            event=report.event,
            subscribe_info=self._subscribe_info() if report.report_subscribe_info else None,
            auth=self.tokens.heartbeat_auth(*auth_stamp()),
        )
        try:
            data = await self.invoker.call(Method.MASTER_CONSUMER_HEARTBEAT, body)
            rsp = consumer_replies.parse_master_response(Method.MASTER_CONSUMER_HEARTBEAT, data)
        except TubeMQError as exc:
            log.warning("master heartbeat failed: %r", exc)
            verdict = self.hb_state.on_response(None)
        else:
            verdict = self.hb_state.on_response(rsp.success, rsp.err_code)
            if rsp.success:
                self._apply(rsp)
                if rsp.event is not None:
                    self.queue.offer(rsp.event)
                    self._rebalance_wake.set()
            else:
                log.warning("master heartbeat: [%d] %s", rsp.err_code, rsp.err_msg)
        if verdict is HeartbeatVerdict.REREGISTER:
            try:
                await self.register_once()
            except TubeMQError as exc:
                log.warning("re-register after 411 failed: %r", exc)
        return verdict is HeartbeatVerdict.BACKOFF

    # ---- rebalance worker --------------------------------------------------------------------

    async def rebalance_loop(self) -> None:
        """Process rebalance events one at a time (§2.4) until :attr:`stopping`."""
        config = RebalanceConfig(
            confirm_wait=self.config.rebalance_confirm_wait,
            # Java's maxRegisterRetryTimes rounds 1 s apart, as time
            # (docs/protocol/consumer.md §2.4).
            register_timeout=float(self.config.register_attempts - 1),
        )
        while not self.stopping:
            if self.queue and (delay := self.pacer.wait(self.clock())) > 0:
                await self._pause_until(self.clock() + delay)  # the newest event waits its turn
                continue
            event = self.queue.take()
            if event is None:
                await self.release_settled_unsure()
                self._rebalance_wake.clear()
                try:
                    async with asyncio.timeout(1.0):
                        await self._rebalance_wake.wait()
                except TimeoutError:
                    pass
                continue
            self.pacer.started(self.clock())
            log.info(
                "rebalance event %d op %d: %d partition(s)",
                event.rebalance_id,
                event.op_type,
                len(event.partitions),
            )
            process = EventProcess(event, held=self.leases.keys(), config=config)
            try:
                while (step := process.next_step(self.clock(), random.random())) is not None:
                    if isinstance(step, StopRebalance):
                        return
                    await self._perform(step, process)
            except Exception:
                log.exception("processing rebalance event %d failed", event.rebalance_id)
                continue
            if process.registered and self.on_assigned is not None:
                await self.on_assigned([k.format() for k in process.registered])

    async def _perform(self, step: object, process: EventProcess) -> None:
        if isinstance(step, Register):
            if self.stopping:  # closing: register nothing more, let the event run out
                return
            codes = await asyncio.gather(*(self._register_partition(p) for p in step.partitions))
            for part, code in zip(step.partitions, codes, strict=True):
                process.on_register_result(part.key, code)
        elif isinstance(step, Sleep):
            await self._pause_until(step.until)
        elif isinstance(step, AwaitReturn):
            await self.await_return(step.keys, step.deadline)
        elif isinstance(step, Unregister):
            keys = [p.key for p in step.partitions]
            if self.on_revoked is not None:
                await self.on_revoked([k.format() for k in keys if k in self.leases])
            await asyncio.gather(
                *(self.release_partition(p, step.rollback_in_use) for p in step.partitions)
            )
        elif isinstance(step, Drop):
            for key in step.keys:
                self.leases.remove(key)
        elif isinstance(step, Report):
            self.hb_state.add_result(step.result)
            # Deviation from Java: report at once instead of on the next periodic heartbeat;
            # the master takes any heartbeat carrying the result (§2.3, §12 item 8).
            self._heartbeat_wake.set()

    async def _pause_until(self, until: float) -> None:
        """Sleep until the monotonic time ``until``, or less if the session stops."""
        try:
            async with asyncio.timeout(max(0.0, until - self.clock())):
                await self._stopped.wait()
        except TimeoutError:
            pass

    async def _register_partition(self, partition: Partition) -> int:
        boot = self._bootstrap_offset(partition.key)
        if boot is not None:
            log.info("%s starts at offset %d", partition.key, boot)
        try:
            rsp = await self.broker.register(
                partition,
                read_status=self.read_status(partition.key, boot),
                filters=self.config.filters_of(partition.topic),
                curr_offset=boot,
            )
            rsp = await self.resume_stored(partition, rsp, stored=boot is None)
        except (TubeMQError, OSError) as exc:
            self.note_register_end(partition, exc)
            log.warning("register of %s at its broker failed: %r", partition.key, exc)
            return 599
        except BaseException as exc:  # cancelled: close() ended the event under way
            self.note_register_end(partition, exc)
            raise
        self.note_register_end(partition, None)
        if not rsp.success:
            log.info("broker refused %s: [%d] %s", partition.key, rsp.err_code, rsp.err_msg)
            return rsp.err_code
        if boot is not None:
            self._bootstrapped.add(partition.key)
            self._time_started.add(partition.key)
        self.leases.add(
            partition, self.clock(), curr_offset=rsp.curr_offset, max_offset=rsp.max_offset
        )
        if self.is_paused(partition.key):
            self.leases.pause([partition.key])
        self.engine.notify()
        return 200

    def _bootstrap_offset(self, key: PartitionKey) -> int | None:
        """The bound offset ``key`` starts at: until its first successful registration of the
        session, while the first connect event is pending and the group is not allocated (§1.4
        item 4); a refused attempt (e.g. 410) retries with the offset. With ``consume_from`` a
        time: the time's offset, until the partition's first successful registration in this
        process (docs/protocol/time.md §4)."""
        if key in self.start_offsets and key not in self._time_started:
            return self.start_offsets[key]
        if key in self._bootstrapped or not self.hb_state.first_connect_pending:
            return None
        if not self.not_allocated:
            return None
        return self._bound_offsets.get(key)

    def _drop(self, keys: Iterable[PartitionKey]) -> None:
        keys = list(keys)
        held = [k for k in keys if k in self.leases]
        super()._drop(keys)
        if held:  # the master still believes them ours: tell it at the next heartbeat
            self.hb_state.held_changed()

    async def release_partition(self, partition: Partition, rollback_in_use: bool = True) -> None:
        """Remove a partition locally and unregister it at its broker (errors logged)."""
        self.engine.forget([partition.key])
        # Moved away by the master: what this consumer read of it says nothing about what it
        # reads when it gets it back (another member may read on meanwhile).
        self.tail.forget(partition.key)
        removed = self.leases.remove(partition.key, rollback_if_in_use=rollback_in_use)
        answered = True
        if removed is not None:
            answered = await self.unregister_at_broker(partition, removed.read_status)
        await self.release_unsure(partition.key)
        if removed is not None and not answered:
            self._release_later(partition, removed.read_status)
