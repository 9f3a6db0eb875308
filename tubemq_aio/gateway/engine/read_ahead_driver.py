"""The read-ahead after a fetch's answer: the partition's next batch read off the critical path
under a read-in-flight mark in Redis, and kept for the partition's next fetch on this replica.

With ``kept_batch_bytes`` > 0 a fetch of a clustering group books its batch and, in the same
Redis round trip, marks a read-ahead of the partition in flight until a deadline on the Redis
clock (``LeaseStore.record_and_mark``; the mark is written only under the live lease whose batch
was booked). The fetch answers without waiting for the broker; a task of the engine's
:class:`~tubemq_aio.supervisor.Supervisor` then sends the GetMessage (no commit flag) and the
CommitOffset right behind it on one connection (``TubeGroup.read_next``), and aborts that
connection at the deadline when the answers have not come, so that none of its requests is
executed by the broker after the deadline. Its end in Redis (``read_ahead_done``) stores the
kept batch's fence and the broker cursor (or nothing when the read failed, started elsewhere
or its commit did not cover it); a mark that is not the read's any more answers ``stale`` and
the batch is dropped. Why the mark is needed, and the simulation that proves the steps below:
``docs/gateway.md``, "Read-ahead off the critical path";
``tests/unit/gateway/test_gateway_read_ahead_model.py``.

The local deadline is taken before the round trip that wrote the mark (the script's clock read
comes later), so it never lies past the mark's ``until``. A read whose answers are unknown
(its connection failed) ends its mark only once the deadline has passed: a request the broker
already received may still run until then. A read-ahead cancelled by the engine's close writes
nothing (its connection is aborted; the mark lapses at its deadline and the next acquire after
it registers at the committed offset). A fetch cancelled in the round trip that may have written
the mark ends it at once with nothing read (:meth:`ReadAheads.abandon`), so that its partition
does not wait for the deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine
from typing import Any

from tubemq_aio.errors import ClientClosedError, TubeMQError
from tubemq_aio.gateway.engine.data import GatewayStats
from tubemq_aio.gateway.engine.kept_batches import KeptBatch, KeptBatches
from tubemq_aio.gateway.errors import GatewayError
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.gateway.leases.lease_store import LeaseStore
from tubemq_aio.gateway.leases.model import KeptFence
from tubemq_aio.gateway.tubemq.next_batch import NextBatch
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup
from tubemq_aio.protocol.consumer_replies import payload_bytes
from tubemq_aio.supervisor import Supervisor

__all__ = ["MAX_READ_AHEADS", "ReadAheadPlan", "ReadAheads"]

log = logging.getLogger("tubemq_aio.gateway")

#: Read-aheads one replica runs at once by default (at most one per partition in any case: the
#: mark of one keeps out another's); a fetch beyond it books its batch without one.
MAX_READ_AHEADS = 1024


@dataclasses.dataclass(frozen=True, slots=True)
class ReadAheadPlan:
    """One read-ahead whose mark is written.

    Attributes:
        key: the lease whose batch was booked (its group, scope and partition).
        token: the mark's token (the kept batch's fence token too).
        start: where the booked batch ends (the broker's committed cursor should be there).
        deadline: ``loop.time()`` by which its requests must have reached the broker.
    """

    key: LeaseKey
    token: str
    start: int
    deadline: float


class ReadAheads:
    """The read-aheads of one replica: a bounded count of tasks owned by the engine.

    Args:
        kept: where a read batch is kept (its ``limit_bytes`` bounds the bytes).
        stats: the replica's counters (``read_aheads_*``, ``broker_rpcs``).
        tasks: the engine's task owner (its close cancels every read-ahead).
        allow_ms: how long a read-ahead may take, in ms (the mark's deadline is this after
            the booking).
        limit: read-aheads running (or about to be sent) at most.

    Raises:
        ValueError: ``allow_ms`` or ``limit`` is below 1.
    """

    def __init__(
        self,
        kept: KeptBatches,
        stats: GatewayStats,
        tasks: Supervisor,
        *,
        allow_ms: int,
        limit: int = MAX_READ_AHEADS,
    ) -> None:
        if allow_ms < 1 or limit < 1:
            raise ValueError(f"allow_ms and limit must be >= 1, got {allow_ms} and {limit}")
        self.kept = kept
        self.allow_ms = allow_ms
        self.limit = limit
        self._stats = stats
        self._tasks = tasks
        self._taken = 0  # reserved or running

    @property
    def running(self) -> int:
        """Read-aheads reserved or running now."""
        return self._taken

    def reserve(self) -> bool:
        """Take a place for one read-ahead before its mark is written; False (read none) when
        read-ahead is off, the engine is closing or :attr:`limit` are running. Every ``True``
        is followed by :meth:`send` or :meth:`unreserve`."""
        if not self.kept.enabled or self._tasks.closed or self._taken >= self.limit:
            return False
        self._taken += 1
        return True

    def unreserve(self) -> None:
        """Give back a place taken by :meth:`reserve` (no mark was written, or it is left to
        lapse)."""
        self._taken -= 1

    def send(self, tube: TubeGroup, store: LeaseStore, ahead: ReadAheadPlan) -> None:
        """Start the read-ahead ``ahead`` (its mark is written) on a place :meth:`reserve`
        took; the caller does not wait for it. When the engine is closing nothing is sent
        (the mark lapses at its deadline)."""
        self._start(self._read(tube, store, ahead), f"read-ahead-{ahead.key.partition_key}")

    def abandon(self, store: LeaseStore, key: LeaseKey, token: str) -> None:
        """End the mark ``token`` that the cut-short round trip booking ``key`` may have
        written, with nothing read (no request was sent: the broker cursor is left unknown, so
        the partition's next lease registers at the committed offset), on a place
        :meth:`reserve` took. Without it the partition would wait for the mark's deadline. A
        mark that was not written answers ``stale``; when the engine is closing the mark
        lapses instead."""
        self._start(self._abandon(store, key, token), f"read-ahead-abandoned-{key.partition_key}")

    async def _abandon(self, store: LeaseStore, key: LeaseKey, token: str) -> None:
        try:
            await store.read_ahead_done(key.group, key.scope, key.partition_key, token, "", -1)
        except GatewayError as exc:  # Redis away: the mark lapses at its deadline
            log.info("read-ahead of %s not ended in Redis: %r", key.partition_key, exc)

    def _start(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` as an engine task on a place :meth:`reserve` took, given back when it
        ends (also when cancelled before its first step) or at once when the engine is closing
        (``work`` is then closed unstarted)."""
        try:
            task = self._tasks.spawn(work, name, essential=False)
        except ClientClosedError:
            self._taken -= 1
            return
        task.add_done_callback(self._ended)

    def _ended(self, _task: asyncio.Task[None]) -> None:
        self._taken -= 1

    async def _read(self, tube: TubeGroup, store: LeaseStore, ahead: ReadAheadPlan) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # the fetch's answer first
        key, start = ahead.key, ahead.start
        if loop.time() >= ahead.deadline:  # too late to send: the mark lapses by itself
            self._stats.read_aheads_aborted += 1
            return
        self._stats.read_aheads_sent += 1
        self._stats.broker_rpcs += 2
        try:
            got = await tube.read_next(key.partition_key, ahead.deadline)
        except TubeMQError as exc:  # the partition is not known to the session: not sent
            log.debug("read-ahead of %s not sent: %r", key.partition_key, exc)
            got = NextBatch(None, None, None)
        self._stats.read_aheads_aborted += int(got.aborted)
        if got.got is None and not got.aborted and got.connection is not None:
            # sent, answers unknown: a request the broker received may run until the deadline
            await asyncio.sleep(max(0.0, ahead.deadline - loop.time()))
        batch = self._batch(tube, ahead, got)
        fence = "" if batch is None else batch.fence.text()
        if batch is not None:  # kept before its fence is in Redis: no fetch can miss it
            self.kept.put(key.group, key.partition_key, batch)
        try:
            done = await store.read_ahead_done(
                key.group, key.scope, key.partition_key, ahead.token, fence, got.cursor(start)
            )
        except GatewayError as exc:  # Redis away: the mark lapses at its deadline
            log.info("read-ahead of %s not ended in Redis: %r", key.partition_key, exc)
            done = None
        except BaseException:  # cancelled (the engine closes): keep nothing
            if batch is not None:
                self.kept.discard(key.group, key.partition_key, batch)
            raise
        if done is None or done.status != "ok":
            self._stats.read_aheads_stale += int(done is not None)
            if batch is not None:
                self.kept.discard(key.group, key.partition_key, batch)
            return
        self._stats.read_aheads_kept += int(batch is not None)

    def _batch(self, tube: TubeGroup, ahead: ReadAheadPlan, got: NextBatch) -> KeptBatch | None:
        """The batch to keep from ``got`` (None: nothing read, started elsewhere, a commit that
        did not cover it, damaged, filtered away, or no room)."""
        end = got.kept_end(ahead.start)
        if end < 0 or got.got is None:
            return None
        messages = tube.screen(ahead.key.partition_key, got.got.messages)
        if not messages:
            return None
        size = payload_bytes(messages)
        if not self.kept.fits(size):
            return None
        fence = KeptFence(ahead.token, ahead.start)
        return KeptBatch(fence, messages, size, got.got.max_offset, end, got.connection)
