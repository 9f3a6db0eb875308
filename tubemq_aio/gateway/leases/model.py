"""The lease state machine of the gateway, pure: no I/O, no clock (``now`` is an argument).

This is the reference the Redis scripts (``lua/*.lua``, run by
:mod:`~tubemq_aio.gateway.leases.lease_store`) implement: the same operations with the same
arguments,
results and state changes, so a test can run one random sequence of operations through both and
compare the states field by field.

State of one group: a boot marker (Redis lost its data when it is missing), a pause flag, a
shared GCRA rate limit, the broker cursor per partition (where the group's broker offset is
believed to be), the kept-batch fence per partition (:class:`KeptFence`), the read-ahead in
flight per partition (:class:`~tubemq_aio.gateway.leases.read_ahead.ReadAhead`: a read the
engine sends after its answer, ``engine/read_ahead_driver.py``), and per scope (``c`` for
clustering, ``b:<client_id>`` for broadcast) the partitions with their committed offset, lease
and redelivery count, plus two schedules:
``ready`` (partition → when it may be leased) and ``leased`` (partition → lease expiry).

Rules (the consume semantics of ``docs/gateway.md``): at most one live lease per (scope,
partition), and none starts while an earlier holder's reads may still reach the broker (a reset
that clears a lease with no batch booked holds the partition until that lease's expiry, a
read-ahead holds it until its deadline); a committed offset moves only by ack, init, reset, an
empty scan or a rewind (the broker lost the tail it stood in); a settled lease never changes
state again; an expired lease is reclaimed by the next acquire but a late ack still counts
until someone leases the partition again; committed offsets are never deleted when a partition
leaves the metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tubemq_aio.gateway.leases.partition_state import (
    HOLD_RETRY_MS,
    PartState,
    ScopeState,
    gcra,
)
from tubemq_aio.gateway.leases.read_ahead import ReadAhead

__all__ = ["Booking", "GroupState", "KeptFence", "PartState", "ScopeState", "gcra"]


@dataclass(frozen=True, slots=True)
class KeptFence:
    """The batch a replica read ahead and keeps in memory for the partition's next fetch.

    A fetch ends with a GetMessage that commits the batch being handed out at the broker and
    brings the partition's next batch; the replica keeps that batch and ``record`` stores its
    fence in Redis. The next ``acquire`` of the partition hands the fence out once (and deletes
    it); the replica serves the kept batch only when :meth:`matches` (see ``docs/gateway.md``,
    "The consume path"). Where the kept batch ends is learned when it is served: the
    GetMessage that commits it answers where the next batch starts.

    Attributes:
        token: the replica's id for this read (random, never reused).
        start: the offset the kept batch starts at (where the broker's committed cursor is).
    """

    token: str
    start: int

    def text(self) -> str:
        """``"<token>|<start>"``, the form Redis stores."""
        return f"{self.token}|{self.start}"

    def matches(self, handed: str, committed: int) -> bool:
        """Whether a batch kept under this fence may be served by a lease that ``acquire``
        answered with fence ``handed`` and committed offset ``committed``: the fence is this
        one (no other read of the partition was booked or leased since) and the batch starts
        exactly at the committed offset (nothing skipped, nothing served twice)."""
        return handed == self.text() and self.start == committed


@dataclass(frozen=True, slots=True)
class Booking:
    """A batch read under a lease, as ``record`` books it (the script's arguments).

    Attributes:
        base: the committed offset the read started from.
        next: the offset right after the batch (committed at once when ``count`` is 0).
        max: the partition's max index offset the broker reported (-1 unknown).
        count: messages in the batch.
        wait_ms: how long the partition rests when the batch is empty.
        cursor: where the broker cursor is now (-1: unknown).
        kept: the fence of the batch the read brought ahead and the replica keeps
            (:meth:`KeptFence.text`; ``""``: none kept). It replaces the partition's fence.
    """

    base: int
    next: int
    max: int
    count: int
    wait_ms: int = 0
    cursor: int = -1
    kept: str = ""

    def fields(self) -> tuple[int, int, int, int, int, int, str]:
        """``(base, next, max, count, wait_ms, cursor, kept)``, the order the script takes
        them."""
        return (self.base, self.next, self.max, self.count, self.wait_ms, self.cursor, self.kept)


@dataclass(slots=True)
class GroupState:
    """Everything the scripts keep for one group (the model of its Redis keys)."""

    booted: bool = False
    paused: bool = False
    rate: float = 0.0
    burst: int = 0
    tat_us: int | None = None
    rate_hold: str | None = None  # "<lease id>|<until ms>": the one read of a limited group
    cursor: dict[str, int] = field(default_factory=dict)
    fence: dict[str, str] = field(default_factory=dict)  # partition -> KeptFence.text()
    reading: dict[str, str] = field(default_factory=dict)  # partition -> ReadAhead.text()
    scopes: dict[str, ScopeState] = field(default_factory=dict)
    woken: list[str] = field(default_factory=list)  # scopes published on the wake channel

    def scope(self, s: str) -> ScopeState:
        """The scope ``s`` (created empty if unknown)."""
        return self.scopes.setdefault(s, ScopeState())

    # ---- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _live(sc: ScopeState, p: str, lid: str, now: int) -> bool:
        ps = sc.parts.get(p)
        return ps is not None and ps.lease_id == lid and sc.leased.get(p, -1) > now

    def _hold_until(self) -> int:
        return 0 if self.rate_hold is None else int(self.rate_hold.partition("|")[2])

    def _drop_hold(self, lid: str) -> None:
        if self.rate_hold is not None and self.rate_hold.startswith(lid + "|"):
            self.rate_hold = None

    def _release(self, s: str, sc: ScopeState, p: str, wait_ms: int, now: int) -> None:
        ps = sc.part(p)
        if ps.lease_id is not None:
            self._drop_hold(ps.lease_id)
            sc.acq.pop(ps.lease_id, None)
        ps.clear_lease(last_settled=ps.lease_id)
        sc.leased.pop(p, None)
        if not ps.gone:
            sc.ready[p] = now + wait_ms
            self.woken.append(s)

    def _forget_cursor(self, p: str) -> None:
        self.cursor.pop(p, None)
        self.fence.pop(p, None)

    def _eligible_at(self, p: str, ready_at: int) -> int:
        """When ``p``, ready at ``ready_at``, may be leased: not before its read-ahead's
        deadline (so a partition due at ``now`` is eligible iff no live mark holds it)."""
        mark = self.reading.get(p)
        return ready_at if mark is None else max(ready_at, ReadAhead.parse(mark).until)

    def _block(self, p: str, lease_end: int, now: int) -> None:
        """Keep ``p`` from being handed out while a read freed early may still reach the broker:
        a read-ahead in flight is voided (token ``""``: its end books nothing) and still blocks
        until its deadline; a live lease's reads (``lease_end`` > ``now``, its expiry) block
        until that expiry. The later of the two becomes the voided mark's deadline."""
        mark = self.reading.get(p)
        until = -1 if mark is None else ReadAhead.parse(mark).until
        if lease_end > now:
            until = max(until, lease_end)
        if mark is not None or until > now:
            self.reading[p] = ReadAhead("", until).text()

    def _rate_wait_ms(self, now: int) -> int:
        if self.rate <= 0:
            return 0
        wait_us, _ = gcra(self.tat_us, now * 1000, self.rate, max(1, self.burst), 0)
        return -(-wait_us // 1000)

    # ---- operations (each mirrors one script; ``now`` is the script's Redis TIME in ms) ------

    def boot(self) -> None:
        """Write the boot marker (first start on an empty store)."""
        self.booted = True

    def acquire(
        self,
        now: int,
        s: str,
        lid: str,
        lease_ms: int,
        holder: str,
        want: str = "",
        reclaim_max: int = 64,
    ) -> tuple[object, ...]:
        """Lease the partition eligible longest (or ``want``).

        Returns:
            ``("lost",)``, ``("paused",)``, ``("throttled", wait_ms)``, ``("held", retry_ms)``
            (a rate-limited group: another read runs; it is charged before the next starts),
            ``("none", next_ready_ms | -1, next_expiry_ms | -1)`` or
            ``("leased", p, cmt | -1, lexp, rc, start | "", cursor | -1, fence | "")``: the
            partition's kept-batch fence is handed to this lease only and deleted (a retried
            acquire answers ``""``). A partition with a read-ahead in flight is not handed out
            (``none`` answers when its mark ends at the latest) until :meth:`read_ahead_done`
            or the mark's deadline; an acquire past the deadline deletes the mark and forgets
            the broker cursor (the next read registers at the committed offset).
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        if lid in sc.acq:  # a retried acquire: the same answer
            p = sc.acq[lid]
            return self._leased(sc, p, "")
        if self.paused and not want:
            return ("paused",)
        wait = self._rate_wait_ms(now)
        if wait and not want:
            return ("throttled", wait)
        if self.rate > 0 and not want and self._hold_until() > now:
            return ("held", min(HOLD_RETRY_MS, self._hold_until() - now))
        expired = sorted((t, p) for p, t in sc.leased.items() if t <= now)[:reclaim_max]
        for _, p in expired:
            ps = sc.part(p)
            del sc.leased[p]
            if ps.lease_id is not None:
                sc.acq.pop(ps.lease_id, None)
            ps.redeliveries += 1
            if not ps.gone:
                sc.ready[p] = now
        due = sorted((t, p) for p, t in sc.ready.items() if self._eligible_at(p, t) <= now)
        pick = want if want and self._eligible_at(want, sc.ready.get(want, now + 1)) <= now else ""
        if not pick and not want and due:
            pick = due[0][1]
        if not pick:
            nxt = min((self._eligible_at(p, t) for p, t in sc.ready.items()), default=-1)
            exp = min(sc.leased.values(), default=-1)
            return ("none", nxt, exp)
        if self.reading.pop(pick, None) is not None:  # past its deadline: the replica is gone
            self._forget_cursor(pick)  # where its read left the broker cursor is unknown
        ps = sc.part(pick)
        del sc.ready[pick]
        sc.leased[pick] = now + lease_ms
        ps.take_lease(lid, now + lease_ms, now, holder)
        sc.acq[lid] = pick
        if self.rate > 0 and not want:
            self.rate_hold = f"{lid}|{now + lease_ms}"
        return self._leased(sc, pick, self.fence.pop(pick, ""))

    def _leased(self, sc: ScopeState, p: str, fence: str) -> tuple[object, ...]:
        ps = sc.part(p)
        cmt = -1 if ps.committed is None else ps.committed
        cursor = self.cursor.get(p, -1)
        return ("leased", p, cmt, ps.lease_expiry, ps.redeliveries, ps.start or "", cursor, fence)

    def init(self, now: int, s: str, p: str, lid: str, offset: int, top: int) -> tuple[object, ...]:
        """Set the start offset of a partition without one (the first writer wins).

        Returns:
            ``("lost",)``, ``("stale",)`` (lease not live) or ``("ok", cmt)``.
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        if not self._live(sc, p, lid, now):
            return ("stale",)
        ps = sc.part(p)
        if ps.committed is None:
            ps.committed, ps.start = offset, None
        ps.max_offset = max(ps.max_offset, top)
        return ("ok", ps.committed)

    def record(
        self, now: int, s: str, p: str, lid: str, booking: Booking, fence_held: bool = True
    ) -> tuple[object, ...]:
        """Book the batch ``[base, next)`` of ``count`` messages read under the lease.

        ``booking.cursor`` ≥ 0 is where the broker cursor now is (-1: unknown);
        ``booking.kept`` becomes the partition's kept-batch fence (``""`` deletes it). Every
        answer but ``lost`` and a retry's deletes any older fence (a read that is not booked
        moved the broker's in-flight batch under it). An empty batch
        (count 0) commits ``next`` at once (scanned entries of sibling partitions or filtered
        messages) and releases the lease; the partition rests ``wait_ms``.

        Returns:
            ``("lost",)``, ``("stale",)``, ``("fenced",)`` (broadcast: the cursor mutex the read
            ran under lapsed, ``fence_held`` False), ``("moved",)`` (cmt is not ``base``: reset
            meanwhile), ``("released", cmt)`` or ``("ok",)``.
        """
        base, nxt, top, n, wait_ms, cursor, _ = booking.fields()
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        ps = sc.part(p)
        if not self._live(sc, p, lid, now):
            self.fence.pop(p, None)  # a read outside the fence chain moved the broker
            if ps.last_settled == lid and ps.lease_id != lid:
                return ("released", -1 if ps.committed is None else ps.committed)
            self._forget_cursor(p)
            return ("stale",)
        if ps.batch_start is not None:
            return ("ok",) if (ps.batch_start, ps.batch_end) == (base, nxt) else ("moved",)
        if not fence_held:
            self._forget_cursor(p)
            return ("fenced",)
        if ps.committed != base or nxt < base:
            self._forget_cursor(p)
            return ("moved",)
        ps.max_offset = max(ps.max_offset, top)
        if cursor >= 0:
            self.cursor[p] = cursor
        else:
            self.cursor.pop(p, None)
        if booking.kept:
            self.fence[p] = booking.kept
        else:
            self.fence.pop(p, None)
        if n > 0 and self.rate > 0:
            _, self.tat_us = gcra(self.tat_us, now * 1000, self.rate, max(1, self.burst), n)
        self._drop_hold(lid)
        if n == 0:
            if nxt != base:
                ps.redeliveries = 0
            ps.committed = nxt
            ps.empty_reads += 1
            self._release(s, sc, p, wait_ms, now)
            return ("released", nxt)
        ps.batch_start, ps.batch_end, ps.empty_reads = base, nxt, 0
        return ("ok",)

    def read_ahead(
        self, now: int, s: str, p: str, lid: str, token: str, allow_ms: int
    ) -> tuple[object, ...]:
        """Mark a read-ahead of ``p`` in flight under ``token`` until ``now + allow_ms``: the
        replica will read the partition's next batch after it answers with the batch booked
        under ``lid`` (sent in the same round trip as that booking, after it). While the mark
        is live no acquire hands ``p`` out; :meth:`read_ahead_done` ends it, or an acquire past
        its deadline (:class:`~tubemq_aio.gateway.leases.read_ahead.ReadAhead`). A retry with
        the same token answers the same.

        Returns:
            ``("lost",)``, ``("stale",)`` (the lease is not live or has no batch booked: do not
            send), ``("busy",)`` (another read-ahead is marked: do not send) or
            ``("ok", until)``.

        Raises:
            ValueError: ``token`` is empty (the mark of a voided read).
        """
        if not token:
            raise ValueError("a read-ahead needs a token")
        if not self.booted:
            return ("lost",)
        text = self.reading.get(p)
        held = None if text is None else ReadAhead.parse(text)
        if held is not None and held.token == token:
            return ("ok", held.until)
        sc = self.scope(s)
        if not self._live(sc, p, lid, now) or sc.part(p).batch_start is None:
            return ("stale",)
        if held is not None:
            return ("busy",)
        mark = ReadAhead(token, now + allow_ms)
        self.reading[p] = mark.text()
        return ("ok", mark.until)

    def read_ahead_done(
        self, now: int, s: str, p: str, token: str, kept: str, cursor: int
    ) -> tuple[object, ...]:
        """End the read-ahead ``token`` of ``p``: ``kept`` (:meth:`KeptFence.text`, ``""``:
        nothing kept) becomes the partition's fence and ``cursor`` (-1: unknown, the read
        failed or its answers did not come) the broker cursor; the scope is woken (the
        partition may be leased again). Nothing changes when the mark is not this read's any
        more (a reset voided it, or an acquire past its deadline ended it): the read's batch
        must then not be served. A mark still this read's is ended even past its deadline: no
        one read the partition since (an acquire would have ended the mark first), and the
        read's requests reached the broker before the deadline or never.

        Returns:
            ``("lost",)``, ``("stale",)`` or ``("ok",)``.
        """
        if not self.booted:
            return ("lost",)
        held = self.reading.get(p)
        if not token or held is None or ReadAhead.parse(held).token != token:
            return ("stale",)
        del self.reading[p]
        if kept:
            self.fence[p] = kept
        else:
            self.fence.pop(p, None)
        if cursor >= 0:
            self.cursor[p] = cursor
        else:
            self.cursor.pop(p, None)
        self.woken.append(s)
        return ("ok",)

    def rewind(
        self, now: int, s: str, p: str, lid: str, old: int, new: int, top: int
    ) -> tuple[object, ...]:
        """Move the committed offset back from ``old`` to ``new`` under a live lease with no
        batch booked yet: the broker's partition now ends at ``new`` (it lost an unflushed tail
        in a crash and hands those offsets to new messages). ``mx`` becomes ``top``, the
        redelivery and empty-read counts, the broker cursor and the kept-batch fence are
        forgotten. The lease stays
        with the caller; every older lease of the partition is already stale.

        Returns:
            ``("lost",)``, ``("stale",)``, ``("moved", cmt | -1)`` (cmt is not ``old``, a batch
            is booked, or ``new`` is not below ``old``) or ``("ok", new)`` (also on a retry).
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        if not self._live(sc, p, lid, now):
            return ("stale",)
        ps = sc.part(p)
        if new < old and ps.committed == new and ps.batch_start is None:
            return ("ok", new)
        if ps.batch_start is not None or ps.committed != old or new >= old:
            return ("moved", -1 if ps.committed is None else ps.committed)
        ps.committed, ps.max_offset, ps.redeliveries, ps.empty_reads = new, top, 0, 0
        self._forget_cursor(p)
        return ("ok", new)

    def settle(
        self, now: int, s: str, p: str, lid: str, action: str, delay_ms: int = 0
    ) -> tuple[object, ...]:
        """Ack (commit the batch), nack (count a redelivery) or release a lease; after a nack or
        a release the partition rests ``delay_ms``.

        A settled lease is remembered for its length (from when it was taken to its expiry)
        after the settle, with how it ended, so a retry learns the truth.

        Returns:
            ``("lost",)``, ``("stale",)`` (taken over), ``("already", cmt, how it ended)``
            (settled before), ``("conflict",)`` (the committed offset moved under the lease) or
            ``(acked|nacked|released, cmt)``.
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        ps = sc.part(p)
        if ps.lease_id != lid:
            ended = sc.settled_as(lid, now)
            if ended is None and ps.last_settled == lid:
                ended = "released"
            if ended is not None:
                return ("already", -1 if ps.committed is None else ps.committed, ended)
            return ("stale",)
        life = max(0, ps.lease_expiry - ps.leased_at)  # both set with the lease id
        if ps.batch_start is None:
            action = "release"
        elif ps.committed != ps.batch_start:
            sc.remember(lid, "released", life, now)
            self._release(s, sc, p, 0, now)
            return ("conflict",)
        wait = 0
        if action == "ack":
            ps.committed, ps.redeliveries, ps.last_ack_at = ps.batch_end, 0, now
        elif action == "nack":
            ps.redeliveries += 1
            wait = delay_ms
        else:
            wait = delay_ms
        result = {"ack": "acked", "nack": "nacked"}.get(action, "released")
        sc.remember(lid, result, life, now)
        self._release(s, sc, p, wait, now)
        return (result, -1 if ps.committed is None else ps.committed)

    def extend(self, now: int, s: str, p: str, lid: str, lease_ms: int) -> tuple[object, ...]:
        """Move the lease expiry to ``now + lease_ms`` (takes back an expired, unre-leased one).

        Returns:
            ``("lost",)``, ``("stale",)`` or ``("ok", lexp)``.
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        ps = sc.part(p)
        if ps.lease_id != lid:
            return ("stale",)
        sc.ready.pop(p, None)
        sc.leased[p] = ps.lease_expiry = now + lease_ms
        sc.acq[lid] = p
        return ("ok", ps.lease_expiry)

    def reset(
        self, now: int, s: str, target: str, pairs: list[tuple[str, int]], plist: list[str]
    ) -> list[tuple[str, int, str]]:
        """Move committed offsets: every partition of the scope (plus ``plist``) to ``target``
        (``earliest``/``latest``, resolved by the next fetch), or each of ``pairs`` to its
        offset. Clears leases (their tokens get ``stale``) and the partitions' kept-batch
        fences; writes the boot marker.

        A partition whose holder may still be reading it is not handed out before those reads
        are over: a read-ahead in flight is voided (it still blocks the partition until its
        deadline, and its end books nothing), and a live lease with no batch booked yet (its
        holder is between its acquire and its booking; its broker requests may reach the broker
        until the lease's expiry, ``docs/gateway.md``, "What is assumed") leaves a voided mark
        until that expiry. The next acquire after the block forgets the broker cursor, so it
        registers at the new offset.

        Returns:
            ``(p, old cmt | -1, new)`` per partition, ``new`` as text.
        """
        self.booted = True
        sc = self.scope(s)
        if target:
            sc.members.update(plist)
            todo: list[tuple[str, int | str]] = [(p, target) for p in sorted(sc.members)]
        else:
            sc.members.update(p for p, _ in pairs)
            todo = list(pairs)
        out: list[tuple[str, int, str]] = []
        for p, to in todo:
            ps = sc.part(p)
            out.append((p, -1 if ps.committed is None else ps.committed, str(to)))
            if isinstance(to, int):
                ps.committed, ps.start = to, None
            else:
                ps.committed, ps.start = None, to
            reading = ps.lease_id is not None and ps.batch_start is None
            self._block(p, sc.leased.get(p, 0) if reading else 0, now)
            if ps.lease_id is not None:
                self._drop_hold(ps.lease_id)
                sc.acq.pop(ps.lease_id, None)
            ps.clear_lease(last_settled=None)
            self.fence.pop(p, None)
            ps.redeliveries = ps.empty_reads = 0
            sc.leased.pop(p, None)
            if not ps.gone:
                sc.ready[p] = now
        self.woken.append(s)
        return out

    def sync_parts(self, now: int, s: str, plist: list[str]) -> tuple[object, ...]:
        """Make the scope's partitions the subscribable ``plist``: new ones become ready, missing
        ones are marked gone (their state, ``cmt`` included, stays).

        Returns:
            ``("lost",)`` or ``("ok", added, gone)``.
        """
        if not self.booted:
            return ("lost",)
        sc = self.scope(s)
        added = gone = 0
        want = set(plist)
        for p in plist:
            if p not in sc.members:
                sc.members.add(p)
                sc.ready[p] = now
                added += 1
            elif sc.part(p).gone:
                sc.part(p).gone = False
                if p not in sc.leased and p not in sc.ready:
                    sc.ready[p] = now
                added += 1
        for p in sorted(sc.members):
            ps = sc.part(p)
            if p not in want and not ps.gone:
                ps.gone = True
                sc.ready.pop(p, None)
                gone += 1
        return ("ok", added, gone)

    def set_rate(self, now: int, rate: float, burst: int) -> None:
        """Shared consume limit in messages/s (0 = off) with a burst.

        What was admitted ahead of the old rate's schedule stays owed: the schedule is
        rescaled to the new rate (the same messages owed), so setting a limit again, even to
        the same values, hands out no fresh burst; and the read a limited group has in flight
        keeps its hold, so no second read starts before it is booked. Off (0) drops both; a
        limit set on a group that had none starts with its burst (reads already running then
        are charged when they book, but hold no one back).
        """
        now_us = now * 1000
        tat = None
        if rate > 0 and self.rate > 0 and self.tat_us is not None and self.tat_us > now_us:
            tat = self.tat_us  # the same rate keeps it exactly (a PUT sent again, too)
            if rate != self.rate:
                tat = math.floor(now_us + (self.tat_us - now_us) * self.rate / rate)
        hold = self.rate_hold if rate > 0 else None
        self.rate, self.burst, self.tat_us, self.rate_hold = rate, burst, tat, hold
