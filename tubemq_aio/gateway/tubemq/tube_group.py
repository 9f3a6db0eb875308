"""TubeMQ side of the gateway: one client-balanced session per group with a shared consumer id.

Every replica of a deployment registers the SAME consumer id for a group
(``<group>_gw-<deployment>-Balance-tubemq-aio-<version>``), so the broker sees one consumer and
any replica may read any partition; the Redis lease is the only mutual exclusion. The session is
the SDK's :class:`~tubemq_aio.consumer.ClientBalancedConsumer` session (master register and
heartbeat, partition metadata, broker register at an offset, GetMessage, CommitOffset); this
module only fixes the id, never unregisters or closes it at the master (another replica still
uses it), and reads one batch at a known offset in 2 broker RPCs when the broker cursor is
already there, 3 otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar

from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.consumer.toolkit import (
    ClientBalanceSession,
    PartitionMeta,
    SharedIdConsumer,
    decode_raw_messages,
    resolve_partition,
)
from tubemq_aio.errors import ClientClosedError, TubeMQError, server_error
from tubemq_aio.gateway.tubemq.shared_id import shared_consumer_id
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import Partition
from tubemq_aio.protocol.consumer_names import planner_group
from tubemq_aio.protocol.consumer_replies import OffsetResponse, RawMessage

__all__ = ["TubeGroup"]

_T = TypeVar("_T")

log = logging.getLogger("tubemq_aio.gateway")

#: Broker answers that mean "this consumer's registration of the partition is gone".
_NOT_REGISTERED = frozenset({411, 412})
#: Register far beyond any index: the broker clamps it to the partition's max (start = latest).
LATEST_OFFSET = 1 << 62
#: Metadata is queried at most this often (seconds) unless a caller forces it.
_META_TTL = 10.0
#: Further broker batches are gathered into one read only while it holds fewer payload bytes.
GATHER_BYTES = 4 << 20
#: Backoff (seconds) between attempts to reopen a session whose start failed.
_RESTART_MIN, _RESTART_MAX = 1.0, 30.0


class TubeGroup:
    """One gateway group's TubeMQ session on this replica (shared consumer id).

    Args:
        masters: master address list.
        group: TubeMQ consumer group.
        topics: subscribed topics.
        deployment: gateway deployment name (part of the shared consumer id).
        rpc_timeout: seconds per RPC.
        client_options: how TubeMQ is reached, as SDK client keywords (TLS, credentials,
            framing: ``TubeMQAccess.client_options()``).
        msg_time_zone: the zone the group's producers stamp ``msg_time`` in (time searches).
    """

    def __init__(
        self,
        *,
        masters: str,
        group: str,
        topics: Sequence[str],
        deployment: str,
        rpc_timeout: float = 5.0,
        client_options: Mapping[str, Any] | None = None,
        msg_time_zone: tzinfo = UTC,
    ) -> None:
        self.group = group
        self.client_id = shared_consumer_id(deployment, group)
        # Two master register attempts: a fetch must fail fast (503) when the master is away.
        options: dict[str, Any] = {
            **(client_options or {}),
            "rpc_timeout": rpc_timeout,
            "fetchers": 1,
            "register_attempts": 2,
            "msg_time_zone": msg_time_zone,
        }
        options.update(masters=masters, group=group, topics=list(topics))
        self._options = options
        self._consumer = self._new_consumer()
        self._start_lock = asyncio.Lock()
        self._closed = False
        #: After a failed start (e.g. 425 at the master) the next one waits this long.
        self._retry_wait = 0.0
        self._retry_at = -math.inf
        self._start_error: TubeMQError | None = None
        self._meta_at = -_META_TTL
        self._meta: list[str] = []
        self.master_ok = False
        #: Broker RPCs spent by :meth:`register` and :meth:`read` (register, get, commit).
        self.rpcs = 0

    @property
    def started(self) -> bool:
        """Whether the master session is registered."""
        return self._consumer.client_id is not None and not self._consumer.closed

    async def start(self) -> None:
        """Register at the master (once; concurrent callers wait for the first).

        A failed start (e.g. 425 from the master) closes the SDK consumer for good, so the next
        call opens a new one; until a backoff (1 s doubling to 30 s) has passed, calls re-raise
        the last error without asking the master.

        Raises:
            ClientClosedError: :meth:`close` was called.
            TubeMQError: the master refused or could not be reached.
        """
        async with self._start_lock:
            if self.started:
                return
            if self._closed:
                raise ClientClosedError(f"the TubeMQ session of group {self.group} is closed")
            if self._start_error is not None and time.monotonic() < self._retry_at:
                raise self._start_error.with_traceback(None)  # no traceback piling up
            if self._consumer.closed:
                # A failed start or a crashed task closes a consumer for good: open a new one.
                await self._consumer.close()
                self._consumer = self._new_consumer()
            try:
                await self._consumer.start()
            except TubeMQError as exc:
                self._retry_wait = min(_RESTART_MAX, max(_RESTART_MIN, 2 * self._retry_wait))
                self._retry_at = time.monotonic() + self._retry_wait
                self._start_error = exc
                log.warning("TubeMQ session of %s did not start: %r", self.group, exc)
                raise
            self._retry_wait, self._start_error = 0.0, None
            self.master_ok = True

    def _new_consumer(self) -> SharedIdConsumer:
        return SharedIdConsumer(self.client_id, consume_from="earliest", **self._options)

    async def close(self) -> None:
        """End the session's tasks and connections (no unregister, no close at the master)."""
        self._closed = True  # not under the start lock: a start stuck at the master ends too
        await self._consumer.close()

    def _session(self) -> ClientBalanceSession:
        return self._consumer.session()

    async def partitions(self, *, force: bool = False) -> list[str]:
        """Subscribable partition keys of the group's topics (cached for 10 s).

        Raises:
            TubeMQError: the master could not be asked and nothing is cached.
        """
        now = time.monotonic()
        if force or now - self._meta_at >= _META_TTL or not self._meta:
            try:
                metas: list[PartitionMeta] = await self._consumer.partitions()
            except TubeMQError:
                self.master_ok = False
                if not self._meta:
                    raise
                return list(self._meta)
            self.master_ok = True
            self._meta = [m.partition_key for m in metas if m.subscribable]
            self._meta_at = now
        return list(self._meta)

    async def offsets_for_times(self, keys: Sequence[str], when: datetime) -> dict[str, int]:
        """Where each partition's messages stamped (``msg_time``) at or after ``when`` begin
        (after its last message when none is), by the SDK's time search
        (docs/protocol/time.md) with a short-lived consumer of the group ``{group}_planner``:
        the shared session, its broker cursors and the group's offsets are not touched.

        Raises:
            RequestTimeoutError: the search took longer than the SDK's 60 s.
            TubeMQError: the master or a broker refused.
        """
        options = dict(self._options, group=planner_group(self.group), consume_from="earliest")
        async with ClientBalancedConsumer(**options) as planner:
            found = await planner.search_times(
                dict.fromkeys(keys, when), planner.config.time_search_timeout
            )
        return {key: f.offset for key, f in found.items()}

    async def latest_offsets(self, keys: Sequence[str]) -> dict[str, int]:
        """Each partition's max offset now (where its next message goes), from one broker
        register and unregister per partition by a short-lived consumer of the group
        ``{group}_planner`` (:meth:`ClientBalancedConsumer.offset_bounds`): the shared session,
        its broker cursors and the group's offsets are not touched.

        Raises:
            TubeMQError: the master or a broker refused or could not be reached.
        """
        options = dict(self._options, group=planner_group(self.group), consume_from="earliest")
        async with ClientBalancedConsumer(**options) as planner:
            return {key: (await planner.offset_bounds(key))[1] for key in keys}

    async def _partition(self, key: str) -> Partition:
        return await resolve_partition(self._session(), key)

    async def register(self, key: str, offset: int) -> tuple[int, int]:
        """Register ``key`` at ``offset`` (clamped by the broker); returns (offset, max).

        Raises:
            ServerError: the broker refused.
        """
        session = self._session()
        partition = await self._partition(key)
        self.rpcs += 1
        rsp = await session.register_at_broker(partition, offset)
        if not rsp.success:
            session.readers.pop(partition.key, None)
            log.warning("register of %s at %d: [%d] %s", key, offset, rsp.err_code, rsp.err_msg)
            raise server_error(rsp.err_code, rsp.err_msg)
        session.readers[partition.key] = partition
        return rsp.curr_offset, rsp.max_offset

    async def read(
        self,
        key: str,
        start: int,
        *,
        cursor_at_start: bool,
        max_messages: int = 1,
        gather_until: float = -math.inf,
    ) -> TubeRead:
        """Read at ``start``: [register] → GetMessage → [GetMessage …] → CommitOffset.

        The register is skipped when ``cursor_at_start`` (the group's broker cursor is known to
        be at ``start``); a GetMessage answer that starts elsewhere, or a lost registration
        (411/412), costs a register and a second GetMessage. The first broker batch is always
        returned whole; further ones are gathered (see :meth:`_gather`) while the total stays
        within ``max_messages``, under :data:`GATHER_BYTES` and before ``gather_until``
        (``time.monotonic()``).

        Raises:
            TubeMQError: a transport error or a broker refusal other than 404/452.
        """
        session = self._session()
        partition = await self._partition(key)
        rpcs, registered, top, begin, resync = 0, False, -1, start, ""
        for _attempt in range(2):
            if not cursor_at_start:
                begin, top = await self.register(key, start)
                rpcs += 1
                registered = True
                if begin < start:
                    # The partition ends below start (a broker lost its unflushed tail): ask
                    # once more, so the caller moves its committed offset back only on two
                    # fresh answers that agree.
                    begin, top = await self.register(key, start)
                    rpcs += 1
            self.rpcs += 1
            got = await session.broker.get_message(
                partition, last_pack_consumed=False, esc_flow_ctrl=False
            )
            rpcs += 1
            if got.max_offset >= 0:
                top = max(top, got.max_offset)
            if not registered and not got.success and got.err_code in _NOT_REGISTERED:
                resync = f"[{got.err_code}] {got.err_msg}"
            elif not registered and got.success and got.curr_offset != begin:
                resync = f"cursor at {got.curr_offset}, not {begin}"
            else:
                break
            cursor_at_start = False  # the next turn registers at start
        if not got.success:
            if got.err_code == 404:
                return TubeRead(
                    "empty", begin, begin, top, rpcs=rpcs, registered=registered, resync=resync
                )
            if got.err_code == 452:
                wait = got.min_limit_time or 200
                return TubeRead("throttled", begin, begin, top, rpcs=rpcs, wait_ms=wait)
            raise server_error(got.err_code, got.err_msg)
        if got.curr_offset != begin:
            # Even right after our own register the cursor moved: someone else reads the group.
            return TubeRead(
                "error",
                begin,
                begin,
                top,
                rpcs=rpcs,
                registered=registered,
                resync=resync,
                error=f"cursor at {got.curr_offset}, expected {begin}",
            )
        messages: list[Message] = []
        filters = self._consumer.config.filters_of(partition.key.topic)

        def decode(batch: tuple[RawMessage, ...]) -> None:
            decoded, _ = decode_raw_messages(
                batch,
                topic=partition.key.topic,
                partition_key=key,
                filters=filters,
                counters=self._consumer.stats,
            )
            messages.extend(decoded)

        done, gets, batches = await self._gather(
            session, partition, got.messages, begin, max_messages, gather_until, decode
        )
        rpcs += gets + 1
        if not done.success:
            raise server_error(done.err_code, done.err_msg)
        top = max(top, done.max_offset)
        return TubeRead(
            "ok",
            begin,
            done.curr_offset,
            top,
            tuple(messages),
            rpcs=rpcs,
            batches=batches,
            registered=registered,
            resync=resync,
        )

    async def _gather(
        self,
        session: ClientBalanceSession,
        partition: Partition,
        first: tuple[RawMessage, ...],
        begin: int,
        max_messages: int,
        until: float,
        decode: Callable[[tuple[RawMessage, ...]], object],
    ) -> tuple[OffsetResponse, int, int]:
        """Read further broker batches after ``first``; end with a CommitOffset.

        A GetMessage with ``lastPackConsumed`` commits the batch before it and reads on, so its
        ``currOffset`` is where the previous batch ended. A batch that would take the total
        past ``max_messages`` is read only when the largest batch so far says it fits; one that
        does not is rolled back (commit with consumed=False leaves the cursor where it starts).
        Each kept batch is decoded (``decode``) while the next RPC is at the broker.

        Returns:
            The final commit answer (``currOffset`` = the end of the kept batches), the
            GetMessage calls made here and the number of batches kept.

        Raises:
            TubeMQError: a GetMessage started somewhere other than where the last batch ended.
        """
        total = largest = len(first)
        size = sum(len(m.payload) for m in first)
        gets, batches, last_start, keep = 0, 1, begin, True
        pending: tuple[RawMessage, ...] = first
        while total + largest <= max_messages and size < GATHER_BYTES and time.monotonic() < until:
            self.rpcs += 1
            gets += 1
            got = await _overlapped(
                session.broker.get_message(partition, last_pack_consumed=True, esc_flow_ctrl=False),
                pending,
                decode,
            )
            pending = ()
            if not got.success:  # 404 (caught up), 452, …: the commit below ends the read
                break
            if got.curr_offset <= last_start:
                raise server_error(
                    500, f"gathering batch started at {got.curr_offset}, not after {last_start}"
                )
            last_start = got.curr_offset
            if total + len(got.messages) > max_messages:
                keep = False
                break
            pending, batches = got.messages, batches + 1
            size += sum(len(m.payload) for m in got.messages)
            total += len(got.messages)
            largest = max(largest, len(got.messages))
        self.rpcs += 1
        done = await _overlapped(session.broker.commit(partition, consumed=keep), pending, decode)
        if done.success and not keep and done.curr_offset != last_start:
            raise server_error(
                500, f"rollback left the cursor at {done.curr_offset}, not {last_start}"
            )
        return done, gets, batches


async def _overlapped(
    call: Coroutine[Any, Any, _T],
    batch: tuple[RawMessage, ...],
    decode: Callable[[tuple[RawMessage, ...]], object],
) -> _T:
    """Run the broker ``call`` and decode ``batch`` while it is on the wire."""
    task = asyncio.ensure_future(call)
    if batch:
        try:
            await asyncio.sleep(0)  # let the task write its request before the CPU work
            decode(batch)
        except BaseException:
            task.cancel()
            raise
    return await task
