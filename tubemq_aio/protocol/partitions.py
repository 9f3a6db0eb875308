"""Partition lease bookkeeping of a consumer (the Java ``RmtDataCache`` equivalent,
docs/protocol/consumer.md §4.4).

A held partition is *idle*, *in use* (leased to one fetcher under a token) or *delayed* (idle
again at a given time). Fetchers take the partition ready longest (FIFO, so each gets its turn)
and release it on errors or once the app confirms the batch. Pause and revoke (rebalance) block
selection without dropping. ``now`` is monotonic float seconds; waits are integer ms (notes).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, IntEnum

from tubemq_aio.errors import InvalidConfirmContextError, MalformedMetaError
from tubemq_aio.protocol.consumer_meta import (
    BrokerInfo,
    Partition,
    PartitionKey,
    ReadStatus,
    SubscribeInfo,
    lag_in_messages,
)

__all__ = [
    "IMMEDIATE_RELEASE_MS",
    "PROTECT_CONFIRM_TIMEOUT",
    "FetchErrorReaction",
    "Lease",
    "OffsetInfo",
    "PartitionLeases",
    "RemovedPartition",
    "SelectStatus",
    "fetch_error_reaction",
    "parse_confirm_context",
]

#: A release wait at or below this many ms makes the partition idle at once (§7.3 last line).
IMMEDIATE_RELEASE_MS = 10
#: ``pullProtectConfirmTimeoutMs``: a pull lease unconfirmed this long (seconds) is reclaimed.
PROTECT_CONFIRM_TIMEOUT = 60.0


class SelectStatus(IntEnum):
    """Why no partition could be taken (client-local codes, §0.3, §4.4)."""

    ALL_PARTITION_FROZEN = 405
    NO_PARTITION_ASSIGNED = 406
    ALL_PARTITION_WAITING = 407
    ALL_PARTITION_INUSE = 408


@dataclass(frozen=True, slots=True)
class FetchErrorReaction:
    """A failed GetMessage: ``remove`` locally (no unregister), else release after ``wait_ms``."""

    remove: bool
    wait_ms: int


_REMOVE_CODES = frozenset({411, 412, 415})
_ERROR_WAIT_MS = {403: 2000, 301: 200, 503: 300}


def fetch_error_reaction(
    err_code: int, *, min_limit_time_ms: int | None = None, msg_not_found_wait_ms: int = 400
) -> FetchErrorReaction:
    """The reaction to a non-200 GetMessage answer (Java, §4.3): remove for 411/412/415, else
    the base wait — 404: ``msg_not_found_wait_ms``; 452: ``minLimitTime`` if the response had it,
    else ``msg_not_found_wait_ms``; 403: 2000; 301: 200; 503 and everything else: 300.
    """
    if err_code in _REMOVE_CODES:
        return FetchErrorReaction(remove=True, wait_ms=0)
    if err_code == 452 and min_limit_time_ms is not None:
        # Java uses the field whenever present, even 0; Go falls back when 0 (§4.3, §12 item 3).
        return FetchErrorReaction(False, min_limit_time_ms)
    if err_code in (404, 452):
        return FetchErrorReaction(False, msg_not_found_wait_ms)
    return FetchErrorReaction(False, _ERROR_WAIT_MS.get(err_code, 300))


@dataclass(frozen=True, slots=True)
class Lease:
    """A partition handed to one fetcher; releases and confirms must present ``token``.

    ``last_pack_consumed`` is the flag to send as ``GetMessageRequestC2B.lastPackConsumed``.
    """

    partition: Partition
    token: int
    taken_at: float
    last_pack_consumed: bool

    @property
    def key(self) -> PartitionKey:
        """The partition key."""
        return self.partition.key

    @property
    def confirm_context(self) -> str:
        """``brokerId:topic:partitionId:token`` (Java form, client-local, §0.2)."""
        return f"{self.key.format()}:{self.token}"


def parse_confirm_context(text: str) -> tuple[PartitionKey, int]:
    """Split a confirm context into key and token.

    Raises:
        InvalidConfirmContextError: not exactly four ``:`` parts (§6.2).
    """
    key_text, sep, token_text = text.rpartition(":")
    try:
        if not sep or key_text.count(":") != 2:
            raise ValueError(text)
        return PartitionKey.parse(key_text), int(token_text)
    except (ValueError, MalformedMetaError):
        raise InvalidConfirmContextError(f"the confirm context {text!r} is invalid") from None


@dataclass(frozen=True, slots=True)
class OffsetInfo:
    """Latest known index offsets of a held partition (-2 when unknown) and ``now`` of update;
    ``at_end``: its last fetch found no new message (404) and nothing was fetched since."""

    curr_offset: int
    max_offset: int
    updated_at: float
    at_end: bool = False

    @property
    def lag(self) -> int:
        """Messages not yet consumed: ``(max - curr) // 28`` (0 when unknown)."""
        return lag_in_messages(self.curr_offset, self.max_offset)


@dataclass(frozen=True, slots=True)
class RemovedPartition:
    """A partition dropped from the table, with what its unregister request needs."""

    partition: Partition
    was_in_use: bool
    last_pack_consumed: bool

    @property
    def read_status(self) -> int:
        """Unregister ``readStatus``: 0 commits the last batch, 1 discards it (§3.1)."""
        return ReadStatus.NORMAL if self.last_pack_consumed else ReadStatus.FROM_MAX


class _State(Enum):
    IDLE = "idle"
    IN_USE = "in_use"
    DELAYED = "delayed"


@dataclass(slots=True)
class _Entry:
    partition: Partition
    state: _State = _State.IDLE
    token: int = 0
    taken_at: float = 0.0
    ready_at: float = 0.0
    paused: bool = False
    revoking: bool = False
    last_pack_consumed: bool = False
    gen: int = 0  # bumped whenever queue membership changes; stale queue items are skipped


class PartitionLeases:
    """The held partitions of one consumer and their lease states.

    Invariant: a partition is leased to at most one fetcher at a time, and a lease is only
    released (or confirmed) by the holder of its token.

    Cost: every per-fetch and per-ack call (:meth:`take`, :meth:`release`, :meth:`confirm`,
    :meth:`is_current`, :meth:`update_offsets`, :meth:`offset_of`, :meth:`next_ready_at`)
    touches only the partitions it names or that became ready (amortised O(1), O(log n) for
    the delay heap); only the whole-table calls (:meth:`keys`, :meth:`by_broker`,
    :meth:`status`, ...) visit every held partition, and :meth:`offsets` is one C-level copy
    of a dict kept up to date by every offsets update (no walk over the records).
    """

    def __init__(self) -> None:
        self._entries: dict[PartitionKey, _Entry] = {}
        #: The offsets record of every held partition (same keys as ``_entries``), apart so
        #: that :meth:`offsets` is a plain dict copy.
        self._offsets: dict[PartitionKey, OffsetInfo] = {}
        #: The held partitions by broker (same keys as ``_entries``), kept by add and remove so
        #: that a broker heartbeat round copies lists instead of regrouping every partition.
        self._by_broker: dict[BrokerInfo, dict[PartitionKey, Partition]] = {}
        self._idle: deque[tuple[PartitionKey, int]] = deque()
        self._delayed: list[tuple[float, int, PartitionKey, int]] = []
        self._leased: set[PartitionKey] = set()
        self._membership = 0
        self._next_token = 0
        self._booked: set[PartitionKey] = set()

    def __repr__(self) -> str:
        return f"<PartitionLeases held={len(self._entries)} in_use={len(self._leased)}>"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def membership(self) -> int:
        """A counter bumped whenever a partition is added or removed: a caller caching
        something per held partition (e.g. their order) rebuilds it only when this moved."""
        return self._membership

    def keys(self) -> list[PartitionKey]:
        """Keys of all held partitions."""
        return list(self._entries)

    def by_broker(self) -> dict[BrokerInfo, list[Partition]]:
        """Held partitions grouped by broker (one broker heartbeat each, §3.3), each broker's
        in the order they were added; new lists (one C-level copy per broker, no regrouping)."""
        return {broker: list(held.values()) for broker, held in self._by_broker.items()}

    def subscribe_infos(self, consumer_id: str, group: str) -> list[SubscribeInfo]:
        """The subscribe report of master heartbeats and re-registration (§2.2)."""
        return [SubscribeInfo(consumer_id, group, e.partition) for e in self._entries.values()]

    def add(
        self,
        partition: Partition,
        now: float,
        *,
        curr_offset: int = -2,
        max_offset: int = -2,
        delay_ms: int = 0,
    ) -> bool:
        """Add a partition just registered at its broker; False if already held.

        It is idle (handed out next), or with ``delay_ms`` > 10 first handed out that many ms
        after ``now`` (a partition registered at its end: the fetch now would only answer
        "no new data")."""
        key = partition.key
        if key in self._entries:
            self.update_offsets(key, now, curr_offset=curr_offset, max_offset=max_offset)
            return False
        entry = self._entries[key] = _Entry(partition)
        self._offsets[key] = OffsetInfo(
            curr_offset if curr_offset >= 0 else -2, max_offset if max_offset >= 0 else -2, now
        )
        self._by_broker.setdefault(partition.broker, {})[key] = partition
        self._membership += 1
        if delay_ms > IMMEDIATE_RELEASE_MS:
            self._next_token += 1  # never reused: no queue item of an earlier life matches
            entry.token = self._next_token
            self._delay(entry, now, delay_ms)
        else:
            self._requeue(entry)
        return True

    def remove(
        self, key: PartitionKey, *, rollback_if_in_use: bool = True
    ) -> RemovedPartition | None:
        """Drop a partition (disconnect, broker failure; §2.4, §3.3, §4.3); None if not held.

        ``rollback_if_in_use``: a batch still leased counts as not consumed (§2.4 step 2)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        del self._offsets[key]
        broker = entry.partition.broker
        held = self._by_broker[broker]
        del held[key]
        if not held:
            del self._by_broker[broker]
        entry.gen += 1
        self._leased.discard(key)
        self._membership += 1
        in_use = entry.state is _State.IN_USE
        consumed = entry.last_pack_consumed and not (in_use and rollback_if_in_use)
        return RemovedPartition(entry.partition, in_use, consumed)

    def book_registration(self, key: PartitionKey) -> bool:
        """Book a registration of ``key``; True if first in this process (readStatus, §9.3)."""
        first = key not in self._booked
        self._booked.add(key)
        return first

    def take(self, now: float) -> Lease | None:
        """Lease the partition ready longest (its lastPackConsumed flag moves into the lease).

        Returns None when nothing is ready; :meth:`status` says why."""
        self._promote(now)
        while self._idle:
            key, gen = self._idle.popleft()
            entry = self._entries.get(key)
            if entry is None or entry.gen != gen or not self._selectable(entry):
                continue
            self._next_token += 1
            entry.gen += 1
            entry.state = _State.IN_USE
            self._leased.add(key)
            entry.token = self._next_token
            entry.taken_at = now
            flag, entry.last_pack_consumed = entry.last_pack_consumed, False
            return Lease(entry.partition, entry.token, now, flag)
        return None

    def status(self, now: float) -> SelectStatus | None:
        """Why :meth:`take` would return None now; None if a partition is ready."""
        self._promote(now)
        entries = list(self._entries.values())
        if not entries:
            return SelectStatus.NO_PARTITION_ASSIGNED
        if any(self._selectable(e) for e in entries):
            return None
        if all(e.paused for e in entries):
            return SelectStatus.ALL_PARTITION_FROZEN
        if any(e.state is _State.DELAYED and not e.paused for e in entries):
            return SelectStatus.ALL_PARTITION_WAITING
        return SelectStatus.ALL_PARTITION_INUSE

    def next_ready_at(self) -> float | None:
        """The earliest time a delayed partition becomes idle, for the fetcher's sleep.

        Reads the head of the delay heap (stale items, of partitions removed or released
        again since, are dropped on the way): no walk over the held partitions."""
        delayed = self._delayed
        while delayed and not self._live(delayed[0]):
            heapq.heappop(delayed)
        return delayed[0][0] if delayed else None

    def is_current(self, key: PartitionKey, token: int) -> bool:
        """Whether ``token`` is the live lease of ``key`` (check before a commit RPC)."""
        entry = self._entries.get(key)
        return entry is not None and entry.state is _State.IN_USE and entry.token == token

    def release(
        self,
        key: PartitionKey,
        token: int,
        now: float,
        *,
        wait_ms: int = 0,
        consumed: bool | None = None,
    ) -> bool:
        """End a lease: idle at once when ``wait_ms`` ≤ 10, else delayed by ``wait_ms``.

        ``wait_ms`` comes from :func:`fetch_error_reaction` / flow control (§4.3, §7.3);
        ``consumed`` sets the ``lastPackConsumed`` flag (None keeps it). Returns False when
        ``token`` is not the live lease (already released or removed).
        """
        entry = self._entries.get(key)
        if entry is None or entry.state is not _State.IN_USE or entry.token != token:
            return False
        if consumed is not None:
            entry.last_pack_consumed = consumed
        self._leased.discard(key)
        if wait_ms > IMMEDIATE_RELEASE_MS:
            self._delay(entry, now, wait_ms)
        else:
            entry.state = _State.IDLE
            self._requeue(entry)
        return True

    def confirm(
        self, context: str, consumed: bool, now: float, *, wait_ms: int = 0
    ) -> PartitionKey:
        """Release a lease by its confirm context once the app handled the batch (§6.2).

        Returns the key (for a commit RPC); raises :class:`InvalidConfirmContextError` if the
        context is malformed or its lease no longer live."""
        key, token = parse_confirm_context(context)
        if not self.release(key, token, now, wait_ms=wait_ms, consumed=consumed):
            raise InvalidConfirmContextError(f"the confirm context {context!r} is not live")
        return key

    def expire_unconfirmed(
        self, now: float, timeout: float = PROTECT_CONFIRM_TIMEOUT
    ) -> list[PartitionKey]:
        """Reclaim leases older than ``timeout`` as not consumed (pull, §4.4); returns keys."""
        expired = [k for k in self._leased if now - self._entries[k].taken_at >= timeout]
        for key in expired:
            self.release(key, self._entries[key].token, now, consumed=False)
        return expired

    def pause(self, keys: Iterable[PartitionKey] | None = None) -> None:
        """Stop handing out these partitions (all when None) until :meth:`resume`."""
        self._set_flag(keys, "paused", True)

    def resume(self, keys: Iterable[PartitionKey] | None = None) -> None:
        """Undo :meth:`pause`."""
        self._set_flag(keys, "paused", False)

    def revoke(self, keys: Iterable[PartitionKey]) -> None:
        """Block new selections of partitions a disconnect event takes away (§2.4 step 2)."""
        self._set_flag(keys, "revoking", True)

    def in_use(self, keys: Iterable[PartitionKey] | None = None) -> frozenset[PartitionKey]:
        """Which of ``keys`` (all when None) are leased right now (visits only ``keys``, or
        only the leased partitions when None)."""
        if keys is None:
            return frozenset(self._leased)
        return frozenset(k for k in keys if k in self._leased)

    def update_offsets(
        self, key: PartitionKey, now: float, *, curr_offset: int = -2, max_offset: int = -2
    ) -> None:
        """Record offsets from a register, GetMessage or commit response (negative = absent)."""
        old = self._offsets.get(key)
        if old is not None:
            self._offsets[key] = OffsetInfo(
                curr_offset if curr_offset >= 0 else old.curr_offset,
                max_offset if max_offset >= 0 else old.max_offset,
                now,
            )

    def mark_at_end(self, key: PartitionKey, now: float) -> None:
        """Record that a fetch of ``key`` found no new message (cleared by the next offsets)."""
        old = self._offsets.get(key)
        if old is not None:
            self._offsets[key] = OffsetInfo(old.curr_offset, old.max_offset, now, at_end=True)

    def offset_of(self, key: PartitionKey) -> OffsetInfo | None:
        """Latest offsets and lag of one held partition (None if not held); O(1), the call
        for per-fetch and per-partition paths."""
        return self._offsets.get(key)

    def offsets(self) -> dict[PartitionKey, OffsetInfo]:
        """Latest offsets and lag of every held partition, in the order they were added.

        A new dict (the records are immutable, so it is a snapshot as of the call), made by
        one C-level copy, no walk over the lease records.
        For whole-table reports; use :meth:`offset_of` for one partition."""
        return self._offsets.copy()

    @staticmethod
    def _selectable(entry: _Entry) -> bool:
        return entry.state is _State.IDLE and not entry.paused and not entry.revoking

    def _requeue(self, entry: _Entry) -> None:
        entry.gen += 1
        if self._selectable(entry):
            self._idle.append((entry.partition.key, entry.gen))

    def _delay(self, entry: _Entry, now: float, wait_ms: int) -> None:
        entry.state = _State.DELAYED
        entry.ready_at = now + wait_ms / 1000.0
        entry.gen += 1
        item = (entry.ready_at, entry.token, entry.partition.key, entry.gen)
        heapq.heappush(self._delayed, item)

    def _live(self, item: tuple[float, int, PartitionKey, int]) -> bool:
        # The token too: a partition removed and added again restarts its gen count, but
        # tokens are never reused, so an item of its earlier life never passes for live.
        entry = self._entries.get(item[2])
        return (
            entry is not None
            and entry.gen == item[3]
            and entry.token == item[1]
            and entry.state is _State.DELAYED
        )

    def _promote(self, now: float) -> None:
        while self._delayed and self._delayed[0][0] <= now:
            item = heapq.heappop(self._delayed)
            if self._live(item):
                entry = self._entries[item[2]]
                entry.state = _State.IDLE
                self._requeue(entry)

    def _set_flag(self, keys: Iterable[PartitionKey] | None, name: str, value: bool) -> None:
        for key in list(self._entries) if keys is None else keys:
            entry = self._entries.get(key)
            if entry is not None and getattr(entry, name) != value:
                setattr(entry, name, value)
                if entry.state is _State.IDLE:
                    self._requeue(entry)
