"""What both consumer sessions (server- and client-balanced) do alike with master and brokers.

Register retries, closing at the master, the protection timeout, unregistering and the broker
heartbeat loop are the same for :class:`~tubemq_aio.consumer._session.MasterSession` and
:class:`~tubemq_aio.consumer._cb_session.ClientBalanceSession`; only the register request, the
heartbeat request and the set of partitions held at brokers differ (docs/protocol/consumer.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from tubemq_aio._client import auth_stamp, local_ip_towards, new_client_id, open_pool
from tubemq_aio._io.pool import ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.auth import TokenState
from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._tail import TailGuard
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.errors import FlowRuleError, RequestTimeoutError, TubeMQError, server_error
from tubemq_aio.master import MasterInvoker
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol import consumer_rpc as rpc
from tubemq_aio.protocol.call_outcome import may_still_arrive
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition, PartitionKey, ReadStatus
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.lost_tail import lost_tail
from tubemq_aio.protocol.partitions import PartitionLeases
from tubemq_aio.protocol.retry import register_deadline, register_pause, retry_can_help
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.protocol.tail_check import unrecorded_resume

__all__ = ["ConsumerWiring", "SessionBase", "wire_consumer"]

log = logging.getLogger("tubemq_aio.consumer")

#: How often a wait for returned partitions re-checks (Java polls every 200 ms).
_RETURN_POLL = 0.05


@dataclass(frozen=True, slots=True)
class ConsumerWiring:
    """The parts one consumer is made of, connected to each other, before any I/O.

    Attributes:
        pool: the connection pool (master and brokers).
        invoker: master RPCs with fail-over.
        broker: broker RPCs.
        engine: the fetch engine.
        leases: partitions registered for fetching.
        flow: flow-control state.
        tokens: authentication tokens.
        host_name: the local address reported to the master.
        clock: monotonic seconds.
        tls: whether broker ports are TLS ports.
    """

    pool: ConnectionPool
    invoker: MasterInvoker
    broker: BrokerRpc
    engine: FetchEngine
    leases: PartitionLeases
    flow: FlowControlState
    tokens: TokenState
    host_name: str
    clock: Callable[[], float]
    tls: bool


def wire_consumer(
    cfg: ConsumerConfig,
    leases: PartitionLeases,
    stats: ConsumerStats,
    clock: Callable[[], float],
    kind: str,
) -> ConsumerWiring:
    """Open the pool and connect broker RPCs, fetch engine and master invoker (no I/O yet).

    Args:
        cfg: the consumer configuration.
        leases: the consumer's lease table.
        stats: the consumer's counters.
        clock: monotonic seconds.
        kind: the consumer kind in its id: ``"Pull"`` or ``"Balance"``.
    """
    pool = open_pool(cfg)
    tls = cfg.ssl_context is not None
    transport = RpcClient(pool, tls=tls)
    first = cfg.masters[0]
    host = cfg.client_host or local_ip_towards(first.host, first.port)
    flow, tokens = FlowControlState(), TokenState(cfg.credentials)
    broker = BrokerRpc(
        transport,
        client_id=new_client_id(host, group=cfg.group, kind=kind),
        group=cfg.group,
        tokens=tokens,
        flow=flow,
        timeout=cfg.rpc_timeout,
        astray=AstrayCalls(
            cfg.rpc_timeout, on_late=partial(_count_late_request, stats), clock=clock
        ),
    )
    engine = FetchEngine(cfg, leases, broker, flow, stats, clock)
    invoker = MasterInvoker(transport, cfg.masters, cfg.rpc_timeout, clock=clock)
    return ConsumerWiring(pool, invoker, broker, engine, leases, flow, tokens, host, clock, tls)


#: Seconds the answer to the unregister of a register cut short is awaited. Once written, the
#: unregister runs after the register at a broker that is only slow or frozen, answer awaited
#: or not; a broker that answers nothing would hold ``close()`` for ``rpc_timeout`` instead.
_UNSURE_UNREGISTER_WAIT = 1.0


def _count_late_request(stats: ConsumerStats) -> None:
    stats.late_request_waits += 1


class SessionBase:
    """The master and broker plumbing shared by both consumer sessions.

    Args:
        config: the consumer configuration.
        parts: the consumer's connected parts (:func:`wire_consumer`).
    """

    #: Register answers no retry can fix: :meth:`register` gives up at once on these.
    register_final_codes: frozenset[int] = frozenset({400, 431})

    def __init__(self, config: ConsumerConfig, parts: ConsumerWiring) -> None:
        self.config = config
        self.invoker = parts.invoker
        self.broker = parts.broker
        self.engine = parts.engine
        self.leases = parts.leases
        self.flow = parts.flow
        self.tokens = parts.tokens
        self.host_name = parts.host_name
        self.clock = parts.clock
        self.client_id = parts.broker.client_id
        #: Tail checks of partitions registered again at the group's stored offset after
        #: their broker was lost (:meth:`resume_stored`, docs/failures.md).
        self.tail = TailGuard(config, self.broker, self.engine)
        # Partitions the fetch loop stops fetching on its own (the broker forgot us, or the
        # fetches kept failing until their deadline) are dropped like those of a failed broker
        # heartbeat, so that they come back (issue 30).
        self.engine.on_broken = self._drop
        #: Partitions a register cut short (cancelled, timed out) may have registered at their
        #: broker without this client's record of it: unregistered when released or closed,
        #: else the group's next holder meets 410 until the broker expires the registration.
        self.unsure: dict[PartitionKey, Partition] = {}
        #: The ``readStatus`` to unregister an :attr:`unsure` partition with, when not
        #: ``NORMAL``: that of a release whose unregister got no answer (it commits or rolls
        #: back the batch in flight as that release meant to).
        self.unsure_read_status: dict[PartitionKey, int] = {}
        #: The consumer is closing: its close unregisters what is :attr:`unsure` once more.
        self.stopping = False
        #: Until when an unregister that got no answer is tried again, per partition
        #: (:meth:`_release_later`).
        self._release_deadlines: dict[PartitionKey, float] = {}

    def _apply_auth_and_flow(self, rsp: consumer_replies.MasterResponse) -> None:
        self.tokens.apply(rsp.authorization, require_auth=rsp.require_auth)
        try:
            rsp.flow.apply(self.flow)
        except FlowRuleError as exc:
            log.warning("ignoring malformed flow-control rules from the master: %s", exc)

    # ---- master ------------------------------------------------------------------------------

    async def register_once(self, deadline: float | None = None) -> consumer_replies.MasterResponse:
        """Send one register request and apply a successful answer; the master list is tried
        round until ``deadline`` (:attr:`clock` time; default ``rpc_timeout`` from now)."""
        raise NotImplementedError

    async def register(self) -> None:
        """Register at the master (Java loop, docs/protocol/consumer.md §1.3, §8.5) for as
        long as ``register_attempts`` attempts 1 s apart would take
        (:func:`~tubemq_aio.protocol.retry.register_deadline`): time, not a count that fast
        failures use up (issue 30, fault 1).

        Raises:
            TopicNotDeployedError: the master says a subscribed topic is not deployed (431, a
                :class:`~tubemq_aio.errors.ServerError` too), at once.
            ServerError: the master refused until then (the last answer's code), at once for
                a code in :attr:`register_final_codes`.
            TubeMQError: the last transport error when no master answered.
        """
        wait = self.config.register_fail_wait
        deadline = register_deadline(self.clock(), self.config.register_attempts, wait)
        failures = 0
        while True:
            try:
                rsp = await self.register_once(deadline)
            except TubeMQError as exc:
                if not retry_can_help(exc):
                    raise
                last: TubeMQError = exc
            else:
                if rsp.success:
                    return
                last = server_error(rsp.err_code, rsp.err_msg, topics=tuple(self.config.topics))
                if rsp.err_code in self.register_final_codes:
                    raise last
            failures += 1
            pause = register_pause(self.clock(), deadline, wait)
            if pause is None:
                raise last
            await asyncio.sleep(pause)

    async def close_at_master(self, timeout: float) -> None:
        """``CloseRequestC2M`` (§1.5, Java ``shutdown``), within ``timeout`` seconds (at most
        ``rpc_timeout``) in all; errors are logged: a master that did not answer in that time
        (or none was left) forgets this member when its heartbeats time out."""
        body = rpc.build_close(
            client_id=self.client_id,
            group=self.config.group,
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        timeout = min(timeout, self.config.rpc_timeout)
        try:
            # One round over the masters: a close does not wait for a master to come back.
            await self.invoker.call(
                Method.MASTER_CONSUMER_CLOSE, body, timeout=timeout, deadline=self.clock()
            )
        except RequestTimeoutError as exc:
            log.warning(
                "no master answered the close within %.1f s (the rest of close_timeout, at most "
                "rpc_timeout); the partitions were released, and the master forgets this member "
                "when its heartbeats time out: %s",
                timeout,
                exc,
            )
        except TubeMQError as exc:
            log.warning("close at the master failed: %r", exc)

    def expire_unconfirmed(self) -> list[PartitionKey]:
        """Take back batches not acked within ``confirm_timeout`` (redelivered later)."""
        expired = self.leases.expire_unconfirmed(self.clock(), self.config.confirm_timeout)
        if expired:
            self.engine.stats.expired += len(expired)
            log.warning(
                "batches of %s were not acked in time; they will be redelivered",
                [str(k) for k in expired],
            )
            self.engine.notify()
        return expired

    # ---- brokers -----------------------------------------------------------------------------

    async def await_return(self, keys: Iterable[PartitionKey], deadline: float) -> None:
        """Stop fetching ``keys`` and wait until the application settled their batches out, or
        until ``deadline`` (:attr:`clock` time); the caller then releases them.

        Polled like Java (every 200 ms there); acks come from any task. Batches in the prefetch
        buffer (also those landing from fetches in flight) were never seen by the application:
        they are dropped instead of waited for.
        """
        keys = list(keys)
        self.leases.revoke(keys)
        while True:
            self.engine.forget(keys)
            if not self.leases.in_use(keys) or self.clock() >= deadline:
                return
            await asyncio.sleep(_RETURN_POLL)

    def read_status(self, key: PartitionKey, offset: int | None) -> int:
        """The ``readStatus`` of a broker register of ``key`` (counts as its registration).

        Without an offset: from ``consume_from`` (its first registration in this process may
        start at the max offset). With one: 0, because readStatus 2 would make the broker
        ignore the offset (§3.2).
        """
        first = self.leases.book_registration(key)
        return self.config.position.read_status(first) if offset is None else ReadStatus.NORMAL

    async def rewind_lost_tail(
        self, partition: Partition, rsp: consumer_replies.OffsetResponse
    ) -> consumer_replies.OffsetResponse:
        """The broker register answer to go on with for ``partition``: ``rsp`` itself, unless it
        shows the broker lost the tail of the store (the group's stored offset lies beyond the
        store's end, :func:`~tubemq_aio.protocol.lost_tail.lost_tail`,
        docs/protocol/consumer.md §3.2). Then ``partition`` is registered again at once
        (``readStatus`` 0, so the broker takes the offset), a warning is logged, and that
        second answer is returned; a successful one counts in ``stats.offset_rewinds``. It
        registers at the store's end when this consumer read the partition before (its tail
        check follows and finds what the broker replaced), else ``lost_tail_window`` messages
        below the loaded offset (:func:`~tubemq_aio.protocol.tail_check.unrecorded_resume`,
        never above the end): the broker came back no lower than that, and the messages it
        stored since, below the end, are read (docs/failures.md).

        Raises:
            TubeMQError / OSError: the second register failed on the way, as a first one can.
        """
        lost = lost_tail(rsp.curr_offset, rsp.max_offset) if rsp.success else None
        if lost is None:
            return rsp
        if self.tail.applies(partition.key):
            resume = lost.end_offset
        else:
            resume = unrecorded_resume(
                lost.stored_offset, lost.end_offset, self.config.lost_tail_window
            )
        log.warning(
            "group %s partition %s: the stored offset %d lies beyond the broker's end %d (the "
            "broker came back without its unflushed tail); registering again at %d, messages "
            "from there on may come again",
            self.config.group,
            partition.key,
            lost.stored_offset,
            lost.end_offset,
            resume,
        )
        again = await self.broker.register(
            partition,
            read_status=ReadStatus.NORMAL,
            filters=self.config.filters_of(partition.topic),
            curr_offset=resume,
        )
        if again.success:
            self.engine.stats.offset_rewinds += 1
        return again

    async def resume_stored(
        self, partition: Partition, rsp: consumer_replies.OffsetResponse, *, stored: bool
    ) -> consumer_replies.OffsetResponse:
        """The broker register answer to read ``partition`` from: ``rsp`` moved back to the
        store's end when the broker lost its tail (:meth:`rewind_lost_tail`) and, when the
        register kept the group's ``stored`` offset of a partition this consumer read before,
        moved back below anything the broker replaced since
        (:class:`~tubemq_aio.consumer._tail.TailGuard`).

        Raises:
            TubeMQError / OSError: a register or a probe failed on the way, as a first
                register can (``TimeoutError`` after ``tail_check_timeout``).
        """
        rsp = await self.rewind_lost_tail(partition, rsp)
        if stored and rsp.success and self.tail.applies(partition.key):
            rsp = await self.tail.check(partition, rsp)
        return rsp

    async def unregister_at_broker(
        self, partition: Partition, read_status: int, *, ordered: bool = True
    ) -> bool:
        """``RegisterRequestC2B`` opType 32 (``ordered``: see ``BrokerRpc.unregister``);
        errors are logged (the broker expires it anyway).

        Returns:
            Whether the broker answered; False when the call failed (timed out, link lost,
            not sent), so the partition may still be registered there.
        """
        try:
            rsp = await self.broker.unregister(partition, read_status=read_status, ordered=ordered)
        except (TubeMQError, OSError) as exc:
            log.warning("unregister of %s failed: %r", partition.key, exc)
            return False
        if not rsp.success:
            log.info("unregister of %s: [%d] %s", partition.key, rsp.err_code, rsp.err_msg)
        return True

    def note_register_end(self, partition: Partition, error: BaseException | None) -> None:
        """A register of ``partition`` was answered (``error`` None) or ended with ``error``:
        a register cut short that may still reach the broker makes it :attr:`unsure`."""
        key = partition.key
        if error is None:
            self.unsure.pop(key, None)
            self.unsure_read_status.pop(key, None)
            self._release_deadlines.pop(key, None)
        elif key not in self.leases and may_still_arrive(error):
            self.unsure[key] = partition

    async def release_unsure(self, key: PartitionKey) -> bool:
        """Unregister ``key`` if it is :attr:`unsure`, without waiting for the register cut
        short (it most likely ran at once or never left; one still on its way would win
        anyway), and awaiting the answer at most ``_UNSURE_UNREGISTER_WAIT`` (1 s).

        A call cut short by cancellation leaves ``key`` :attr:`unsure` again.

        Returns:
            False when an unregister was sent and got no answer in that time.
        """
        partition = self.unsure.pop(key, None)
        read_status = self.unsure_read_status.pop(key, ReadStatus.NORMAL)
        if partition is None:
            return True
        answered = False
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_UNSURE_UNREGISTER_WAIT):
                    answered = await self.unregister_at_broker(
                        partition, read_status, ordered=False
                    )
        except asyncio.CancelledError:
            # Cut short (a close cancels its worker): still unsure, so that the close's own
            # pass unregisters it once more (the call cut short may or may not have run).
            self.unsure.setdefault(key, partition)
            if read_status != ReadStatus.NORMAL:
                self.unsure_read_status.setdefault(key, read_status)
            raise
        return answered

    def settled_unsure(self) -> list[PartitionKey]:
        """The :attr:`unsure` partitions whose register or unregister without answer has had
        its ``rpc_timeout`` at the broker (nothing of it can run there any more)."""
        rest = self.broker.astray.rest
        return [k for k in self.unsure if rest(k, registrations_only=True) <= 0]

    async def release_settled_unsure(self, keys: Iterable[PartitionKey] | None = None) -> None:
        """Unregister the partitions (of ``keys``, default all) a register cut short (timed
        out: a rebalance event's, a client-balanced ``connect()`` or positioned read), or a
        release whose unregister got no answer, may have left registered at their broker, once
        that call had its ``rpc_timeout`` there
        (:class:`~tubemq_aio.consumer._astray.AstrayCalls`): a late one has run by then, and
        the unregister undoes it (or finds nothing). Another member may take such a partition
        meanwhile (the master hands it out again, or the application connects it elsewhere),
        and met 410 until this consumer closed or the broker expired the registration (about
        35 s). An unregister that gets no answer again is tried again the same way until
        ``unregister_retry_window`` after the first. A later register of the partition here
        takes it off :attr:`unsure` first; the caller keeps registers of ``keys`` from running
        meanwhile (the rebalance worker runs one event at a time, the client-balanced consumer
        locks each partition)."""
        settled = self.settled_unsure()
        if keys is not None:
            wanted = set(keys)
            settled = [k for k in settled if k in wanted]
        if not settled:
            return
        retry = [
            (self.unsure[k], self.unsure_read_status.get(k, ReadStatus.NORMAL)) for k in settled
        ]
        answered = await asyncio.gather(*(self.release_unsure(k) for k in settled))
        for (partition, read_status), done in zip(retry, answered, strict=True):
            if done:
                self._release_deadlines.pop(partition.key, None)
            else:
                self._release_later(partition, read_status)

    def _release_later(self, partition: Partition, read_status: int) -> None:
        """The unregister of ``partition`` got no answer: the broker may still hold the
        registration (the call timed out before the broker ran it, or never left), so the
        group's next holder would meet 410 until the broker expires it. Make it
        :attr:`unsure` again, to be unregistered with ``read_status`` once the call had its
        ``rpc_timeout`` (:meth:`release_settled_unsure`; while the consumer is closing, by the
        close's own pass over what is unsure, which runs after its workers stopped), unless
        ``unregister_retry_window`` has passed since the first unanswered unregister (the
        broker has expired the registration)."""
        key = partition.key
        now = self.clock()
        window = self.config.unregister_retry_window
        deadline = self._release_deadlines.setdefault(key, now + window)
        if now >= deadline:
            self._release_deadlines.pop(key, None)
            log.warning("%s: no unregister answered; left to the broker's expiry", key)
            return
        self.unsure[key] = partition
        if read_status != ReadStatus.NORMAL:
            self.unsure_read_status[key] = read_status

    def held_by_broker(self) -> dict[BrokerInfo, list[Partition]]:
        """Every partition registered at a broker by this client, grouped by broker."""
        return self.leases.by_broker()

    def forget_held(self, key: PartitionKey) -> bool:
        """Remove ``key`` from what this client holds, without unregistering; True if held."""
        self.unsure.pop(key, None)
        self.unsure_read_status.pop(key, None)
        return self.leases.remove(key) is not None

    async def broker_heartbeat_loop(self) -> None:
        """Heartbeat every broker holding our partitions, every ``heartbeat_interval`` (§3.3)."""
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            groups = self.held_by_broker()
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
        dropped = [k for k in keys if self.forget_held(k)]
        if dropped:
            log.info("broker no longer knows %s; dropped locally", [str(k) for k in dropped])
            self.engine.forget(dropped)
