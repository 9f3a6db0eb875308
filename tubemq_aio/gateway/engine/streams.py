"""Streaming consume on the engine's leases: one task per stream fetches batch after batch
while fewer than ``window`` of its batches are unacked, and gives back what is still unacked
when it ends.

A stream is a series of ordinary engine fetches (the same leases, the same redelivery): it
never commits anything itself. Its window shrinks when a batch is settled through this replica
(:meth:`StreamHub.settled`, at once), when a probe of Redis shows the lease gone (settled
through another replica), or when the lease's time has passed (the batch is redelivered). When
the stream ends (client gone, ``max_seconds``, shutdown) its unacked leases are released, so
their batches are delivered again at once instead of after the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.stream_config import StreamConfig
from tubemq_aio.gateway.engine.data import FetchOutcome, LagReport, Lease
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.errors import LeaseStaleError, TooManyWaitersError
from tubemq_aio.supervisor import Supervisor

__all__ = ["BatchStream", "StreamEvent", "StreamHub"]

log = logging.getLogger("tubemq_aio.gateway")

#: Seconds a stream rests after a retriable error before it fetches again.
_ERROR_PAUSE = 1.0
#: Seconds past a held lease's end at which a long poll of the stream ends (timers may fire
#: a little early; the lease must have run out when it is looked at).
_PAST_LEASE = 0.02
EndReason = Literal["max_seconds", "error", "shutdown", "lease_expired"]


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One thing a stream has to say, in order.

    Attributes:
        kind: ``batch`` (``outcome`` holds a leased batch), ``error`` (``error`` holds what a
            fetch raised; the stream goes on when it is retriable) or ``end`` (``reason``).
        outcome: the fetch's outcome (``batch`` only).
        error: the exception (``error`` only).
        reason: why the stream ended (``end`` only).
    """

    kind: Literal["batch", "error", "end"]
    outcome: FetchOutcome | None = None
    error: Exception | None = None
    reason: EndReason | None = None


@dataclass(slots=True)
class _Held:
    lease: Lease
    deadline: float  # loop time at which the lease has surely run out
    next_offset: int | None  # where an ack moves the committed offset (None: not known)


class _LeaseRanOut(Exception):
    """A batch of this stream was not acked through any replica within its lease."""


class _Stalled(Exception):
    """The writer took no event until the stream's deadline (a client that stopped reading)."""


@dataclass(slots=True, eq=False)
class BatchStream:
    """The consume loop of one stream (run by :meth:`StreamHub.open`).

    Args:
        engine: the consume engine (settle for releases, lag for probes).
        fetch: one engine fetch long-polling up to the given milliseconds.
        group: the group read.
        client_id: the broadcast client (None in a clustering group).
        holder: the lease holder label of this stream's fetches (unique per stream: a probe
            recognises its own leases by it).
        window: unacked batches held at most (>= 1).
        lease_ms: the lease of each batch (the window forgets a batch after it).
        settings: the replica's :class:`StreamConfig`.
    """

    engine: ConsumeEngine
    fetch: Callable[[int], Awaitable[FetchOutcome]]
    group: str
    client_id: str | None
    holder: str
    window: int
    lease_ms: int
    settings: StreamConfig
    events: asyncio.Queue[StreamEvent] = field(init=False)
    held: dict[str, _Held] = field(init=False, default_factory=dict)
    _room: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    _on_end: Callable[[BatchStream], None] | None = field(init=False, default=None)
    _stop_asked: bool = field(init=False, default=False)
    _releasing: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        # batches never exceed the window; one error or end comes on top
        self.events = asyncio.Queue(maxsize=self.window + 2)

    def settled(self, lease_id: str) -> None:
        """Forget a lease that was acked, nacked or found stale (frees a window slot)."""
        if self.held.pop(lease_id, None) is not None:
            self._room.set()

    def stop(self, task: asyncio.Task[None]) -> None:
        """End the stream run by ``task``: cancel it unless it is already releasing its leases
        (a cancel then would cut the releases short). The loop also checks the request before
        each fetch and each wait, so a cancel that a library swallowed (Python 3.11's
        ``asyncio.wait_for``) cannot keep it fetching for a client that is gone."""
        self._stop_asked = True
        self._room.set()
        if not task.done() and not self._releasing:
            task.cancel()

    def _check_stop(self) -> None:
        if self._stop_asked:
            raise asyncio.CancelledError

    async def run(self, retriable: Callable[[Exception], bool | None]) -> None:
        """Fetch and queue batches until ``max_seconds``, a final error or cancellation;
        release the unacked leases on the way out.

        Args:
            retriable: for an exception a fetch raised: True (queue it, pause, go on), False
                (queue it, end the stream) or None (not an answerable error: raised).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.max_seconds
        try:
            reason = await self._loop(loop, deadline, retriable)
            await self._put(StreamEvent("end", reason=reason), deadline)
        except _Stalled:
            log.info("a stream of group %r ended: its client read nothing", self.group)
        finally:
            self._releasing = True
            await self.release_all()

    async def _loop(
        self,
        loop: asyncio.AbstractEventLoop,
        deadline: float,
        retriable: Callable[[Exception], bool | None],
    ) -> EndReason:
        while (left := deadline - loop.time()) > 0:
            self._check_stop()
            try:
                await self._forget_expired(loop.time())
                if len(self.held) >= self.window:
                    await self._wait_room(loop, deadline)
                    continue
            except _LeaseRanOut:
                return "lease_expired"
            # a long poll ends by the time a held lease runs out, which is then looked at
            first_out = min((h.deadline for h in self.held.values()), default=deadline)
            wait_s = min(left, first_out - loop.time() + _PAST_LEASE)
            try:
                outcome = await self.fetch(max(1, min(self.settings.wait_ms, int(wait_s * 1000))))
            except Exception as exc:  # classified below; a bug is raised again
                go_on = retriable(exc)
                if go_on is None:
                    raise
                await self._put(StreamEvent("error", error=exc), deadline)
                if not go_on:
                    return "error"
                await asyncio.sleep(min(_ERROR_PAUSE, max(0.0, deadline - loop.time())))
                continue
            lease = outcome.lease
            if outcome.status == "ok" and lease is not None:
                ends = None if outcome.position is None else outcome.position.next
                self.held[lease.lease_id] = _Held(lease, loop.time() + self.lease_ms / 1000, ends)
                await self._put(StreamEvent("batch", outcome=outcome), deadline)
            elif outcome.status == "throttled":
                pause = (outcome.retry_after_ms or 100) / 1000
                await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
        return "max_seconds"

    async def _put(self, event: StreamEvent, deadline: float) -> None:
        # the queue has room for the window and one more event: a writer that stopped
        # reading (a stalled client) ends the stream at its deadline
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(max(0.0, deadline - loop.time()) + 1.0):
                await self.events.put(event)
        except TimeoutError:
            raise _Stalled from None

    async def _wait_room(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        """Wait (at most until ``deadline``) until the window has room: a settle through
        this replica, a probe showing leases gone, or a lease's time running out."""
        next_probe = loop.time() + self.settings.probe_interval_ms / 1000
        while len(self.held) >= self.window and (now := loop.time()) < deadline:
            self._check_stop()
            await self._forget_expired(now)
            if len(self.held) < self.window:
                return
            if now >= next_probe:
                await self._probe()
                next_probe = loop.time() + self.settings.probe_interval_ms / 1000
                continue
            first_out = min(h.deadline for h in self.held.values())
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(next_probe, first_out, deadline) - now):
                    await self._room.wait()

    async def _forget_expired(self, now: float) -> None:
        """Forget the held leases whose time ran out; raise :class:`_LeaseRanOut` when one of
        them was not acked through any replica (the partition's committed offset did not reach
        the batch's end): its client stopped processing, and a stream that went on would lease
        the batch to it again and again, burning its redeliveries (and dead-lettering it with
        ``max_redeliveries``). When Redis cannot be asked, they are forgotten as before."""
        expired = [k for k, h in self.held.items() if h.deadline <= now]
        if not expired:
            return
        report = await self._lag()
        if report is None:
            for lease_id in expired:
                del self.held[lease_id]  # redelivered by its lease; no longer ours
            return
        committed = {p.partition_key: p.committed for p in report.partitions}
        unacked = False
        for lease_id in expired:
            held = self.held.pop(lease_id)
            cmt = committed.get(held.lease.partition_key)
            unacked |= held.next_offset is None or cmt is None or cmt < held.next_offset
        if unacked:
            log.info(
                "a stream of group %r ended: a batch it delivered ran out of its lease unacked",
                self.group,
            )
            raise _LeaseRanOut

    async def _probe(self) -> None:
        """Forget the held leases Redis no longer shows as this stream's (settled through
        another replica). A failed probe changes nothing (the lease times still bound it)."""
        report = await self._lag()
        if report is None:
            return
        mine = {p.partition_key for p in report.partitions if p.lease_holder == self.holder[:200]}
        for lease_id in [k for k, h in self.held.items() if h.lease.partition_key not in mine]:
            del self.held[lease_id]

    async def _lag(self) -> LagReport | None:
        """The group's lag report as Redis holds it, or None when it could not be read in
        time (logged)."""
        try:
            async with asyncio.timeout(self.settings.probe_interval_ms / 1000 + 5.0):
                return await self.engine.lag(self.group, client_id=self.client_id)
        except (TubeMQError, TimeoutError) as exc:
            log.debug("stream probe of group %r failed: %r", self.group, exc)
            return None

    async def release_all(self) -> None:
        """Give back every unacked lease (no redelivery count), within ``release_timeout``;
        a lease not released in time comes back when it expires."""
        held = [h.lease for h in self.held.values()]
        self.held.clear()
        if self._on_end is not None:
            self._on_end(self)
        if not held:
            return
        try:
            async with asyncio.timeout(self.settings.release_timeout):
                await asyncio.gather(*(self._release(lease) for lease in held))
        except TimeoutError:
            log.warning(
                "a stream of group %r ended; %d leases were not released in time "
                "and come back when they expire",
                self.group,
                len(held),
            )

    async def _release(self, lease: Lease) -> None:
        ref = lease.key
        try:
            await self.engine.settle(ref, "release")
        except LeaseStaleError:
            pass  # settled meanwhile (an ack on its way), or taken over after expiry
        except TubeMQError as exc:
            log.warning(
                "releasing a lease of group %r failed (%r): it comes back when it expires",
                self.group,
                exc,
            )


class StreamHub:
    """The streams of one replica: owns their tasks, caps their number, and tells a stream
    when one of its leases was settled through this replica.

    Args:
        settings: the replica's :class:`StreamConfig` (``max_streams``, ``release_timeout``).
    """

    def __init__(self, settings: StreamConfig) -> None:
        self.settings = settings
        self.tasks = Supervisor("tubemq-gateway-streams")
        self._streams: set[BatchStream] = set()
        self._by_task: dict[asyncio.Task[None], BatchStream] = {}
        self._serial = itertools.count(1)
        self._closed = False

    @property
    def running(self) -> int:
        """Streams served now."""
        return len(self._streams)

    @property
    def closed(self) -> bool:
        """Whether the replica is shutting down (:meth:`drain` or :meth:`close` was called):
        its streams end with the reason ``shutdown`` and no new one opens."""
        return self._closed

    def drain(self) -> None:
        """The replica is shutting down: open no more streams and end every running one
        now (each releases its unacked leases), without waiting for them."""
        self._closed = True
        for task in self.tasks.tasks:
            self.stop(task)

    def next_id(self) -> int:
        """A serial number for the next stream (its holder label)."""
        return next(self._serial)

    def open(
        self, stream: BatchStream, retriable: Callable[[Exception], bool | None]
    ) -> asyncio.Task[None]:
        """Start ``stream``'s task (owned here; it ends on :meth:`close`).

        Raises:
            TooManyWaitersError: ``max_streams`` run already, or the hub is closed (503).
        """
        if self._closed or len(self._streams) >= self.settings.max_streams:
            raise TooManyWaitersError("this replica serves as many streams as it may")
        self._streams.add(stream)
        stream._on_end = self._streams.discard
        try:
            task = self.tasks.spawn(
                stream.run(retriable), f"stream-{stream.group}", essential=False
            )
        except BaseException:
            self._streams.discard(stream)
            raise
        self._by_task[task] = stream
        task.add_done_callback(lambda done: self._by_task.pop(done, None))
        return task

    def settled(self, lease_id: str) -> None:
        """A lease was acked, nacked or found stale through this replica: free its stream's
        window slot (a no-op when no stream here holds it)."""
        for stream in self._streams:
            stream.settled(lease_id)

    def stop(self, task: asyncio.Task[None]) -> None:
        """End the stream that ``task`` runs (see :meth:`BatchStream.stop`); a no-op for a
        task that ended."""
        stream = self._by_task.get(task)
        if stream is not None:
            stream.stop(task)

    async def close(self) -> None:
        """End every stream (each releases its unacked leases), waiting at most twice
        ``release_timeout``; idempotent."""
        self.drain()
        tasks = self.tasks.tasks
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2 * self.settings.release_timeout)
            if pending:
                # Past their release budget: cancel again, so that no stream outlives the hub
                # (a lease they still hold comes back when it expires).
                log.warning("%d streams did not end in time; cancelled again", len(pending))
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=self.settings.release_timeout)
