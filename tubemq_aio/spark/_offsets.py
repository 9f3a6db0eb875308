"""Pure offset planning of the Spark source: no I/O, no Spark, unit-tested on its own.

TubeMQ offsets are byte positions in a broker store's index file, :data:`RECORD` bytes per
message; the partitions of one store share the index, so a partition's messages occupy some of
the slots only. Two consequences shape the planning:

* A range ``[start, start + RECORD * k)`` of a store holds *at most* ``k`` messages of all its
  partitions together (one per slot), so a limit in messages turned into ``k`` slots per store
  is an upper bound on the rows of a micro-batch.
* Slots are aligned to :data:`RECORD` from the store's first offset, so any ``start + RECORD*i``
  is a record boundary: ranges may be split there and every message stays in exactly one part.

Offsets cross into Spark as JSON objects ``{partition_key: offset}`` with sorted keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from tubemq_aio.checks import Checks

__all__ = [
    "RECORD",
    "OffsetRange",
    "StoreBounds",
    "lost_partitions",
    "normalize_offsets",
    "plan_end",
    "plan_ranges",
    "resolve_start",
    "store_of",
]

K = TypeVar("K", str, tuple[str, str, int])

#: Bytes per index record: offsets advance by this much per message of the store.
RECORD = 28

#: Partition ids of a broker topic are ``storeId * STORE_BASE + i`` (TubeMQ's
#: ``META_STORE_INS_BASE``).
STORE_BASE = 10000


@dataclass(frozen=True, slots=True)
class StoreBounds:
    """The offsets a partition's store holds now: ``[min_offset, max_offset)``.

    Attributes:
        min_offset: the earliest offset still on the broker.
        max_offset: the store's end (the offset the next message will get).
    """

    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """One Spark task's work: the messages of ``key`` with offsets in ``[start, end)``."""

    key: str
    start: int
    end: int

    @property
    def records(self) -> int:
        """Index slots in the range (an upper bound on the partition's messages in it)."""
        return max(0, self.end - self.start) // RECORD


def normalize_offsets(offsets: Mapping[str, object]) -> dict[str, int]:
    """An offset dict as Spark gets it back from JSON: keys sorted, values plain ints.

    Raises:
        ConfigError: a value is not an int ≥ 0 (a ``ValueError``; every bad one is named).
    """
    checks = Checks("offsets")
    result = {
        str(key): checks.integer(f"offset of {key!r}", offsets[key], low=0)
        for key in sorted(offsets)
    }
    checks.done()
    return result


def resolve_start(
    kind: str, explicit: Mapping[str, int], bounds: Mapping[str, StoreBounds]
) -> dict[str, int]:
    """The first offsets of a query: ``earliest`` (store min), ``latest`` (store end) or the
    ``explicit`` offsets (partitions not listed start at their earliest offset)."""
    result: dict[str, int] = {}
    for key, b in bounds.items():
        if kind == "latest":
            result[key] = b.max_offset
        elif kind == "json" and key in explicit:
            result[key] = explicit[key]
        else:
            result[key] = b.min_offset
    for key, offset in explicit.items():
        result.setdefault(key, offset)  # a listed partition the metadata does not show (yet)
    return normalize_offsets(result)


def lost_partitions(start: Mapping[str, int], bounds: Mapping[str, StoreBounds]) -> list[str]:
    """Keys whose planned offset is no longer on the broker: below the store's min (deleted by
    retention) or beyond its end (store reset or topic re-created)."""
    return sorted(
        key
        for key, offset in start.items()
        if key in bounds and not bounds[key].min_offset <= offset <= bounds[key].max_offset
    )


def _shares(available: Mapping[K, int], limit: int) -> dict[K, int]:
    """Split ``limit`` records over partitions in proportion to what each has available (the
    Kafka source's rule); the rounding remainder goes to the largest fractions, ties by key."""
    total = sum(available.values())
    if total <= limit:
        return dict(available)
    exact = {k: limit * v / total for k, v in available.items()}
    shares = {k: min(available[k], math.floor(x)) for k, x in exact.items()}
    remainder = limit - sum(shares.values())
    for key in sorted(exact, key=lambda k: (-(exact[k] - shares[k]), k)):
        if remainder <= 0:
            break
        if shares[key] < available[key]:
            shares[key] += 1
            remainder -= 1
    return shares


def store_of(key: str) -> tuple[str, str, int]:
    """The broker store a partition key belongs to: ``(brokerId, topic, partitionId // 10000)``
    (the broker numbers partitions ``storeId * 10000 + i``; the partitions of one store share
    its index)."""
    broker, topic, partition = key.split(":")
    return broker, topic, int(partition) // STORE_BASE


def plan_end(
    start: Mapping[str, int], bounds: Mapping[str, StoreBounds], max_messages: int | None
) -> dict[str, int]:
    """The end offsets of the next micro-batch.

    The limit is applied per *store*: the partitions of a store share one index, so they all end
    at the same offset ``E = low + RECORD * k``, where ``low`` is the smallest start among them
    and ``k`` the store's share. Each index slot in ``[low, E)`` holds one message of one
    partition, so the store contributes at most ``k`` messages, and counting a slot once (not
    once per partition) makes the batches as large as the limit allows.

    Args:
        start: the batch's start offsets (previous end).
        bounds: every partition's store bounds now.
        max_messages: at most this many messages over all partitions, split over stores in
            proportion to their backlog; None: everything.

    Returns:
        Offsets with sorted keys. A partition absent from ``start`` (new mid-stream) enters at
        its ``min_offset`` and is read from there by the next batch; a partition never moves
        backwards, and one the metadata no longer shows keeps its offset.
    """
    known = {key: offset for key, offset in start.items() if key in bounds}
    stores: dict[tuple[str, str, int], list[str]] = {}
    for key in known:
        stores.setdefault(store_of(key), []).append(key)
    low = {s: min(known[k] for k in keys) for s, keys in stores.items()}
    high = {s: max(bounds[k].max_offset for k in keys) for s, keys in stores.items()}
    available = {s: max(0, high[s] - low[s]) // RECORD for s in stores}
    shares = available if max_messages is None else _shares(available, max_messages)
    end = dict(start)
    for store, keys in stores.items():
        stop = low[store] + RECORD * shares[store]
        for key in keys:
            end[key] = max(known[key], min(stop, bounds[key].max_offset))
    for key, b in bounds.items():
        end.setdefault(key, b.min_offset)
    return normalize_offsets(end)


def plan_ranges(
    start: Mapping[str, int], end: Mapping[str, int], min_partitions: int | None = None
) -> list[OffsetRange]:
    """The ranges to read between two offset dicts, one per partition that moved.

    A partition missing from ``start`` contributes nothing (it entered the offsets at its
    earliest offset, see :func:`plan_end`). With ``min_partitions``, big
    ranges are cut at record boundaries until there are at least that many (when the slots
    allow it), in proportion to their size.

    Returns:
        Ranges sorted by key and start; ``[]`` when nothing moved (``start == end``).
    """
    ranges = [
        OffsetRange(key, start[key], stop)
        for key, stop in sorted(end.items())
        if key in start and stop > start[key]
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.records for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.records, math.ceil(min_partitions * r.records / max(total, 1))))
        step = math.ceil(r.records / pieces)
        cut = r.start
        while cut < r.end:
            stop = min(r.end, cut + RECORD * step)
            result.append(OffsetRange(r.key, cut, stop))
            cut = stop
    return result
