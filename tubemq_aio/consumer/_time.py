"""Driving the time search with positioned reads (docs/protocol/time.md).

:class:`~tubemq_aio.protocol.time_search.OffsetTimeSearch` decides where to read; this module
reads there through a :class:`~tubemq_aio.consumer.client_balanced.ClientBalancedConsumer`
(``read_at``: register + GetMessage + commit, so every read reports its batch's end) and hands
each batch's ``msg_time`` values back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Protocol

from tubemq_aio.checks import MAX_SECONDS, Checks
from tubemq_aio.consumer._cb_models import PositionedRead, parse_key
from tubemq_aio.errors import ConfigError, ConsumerConfigError, RequestTimeoutError
from tubemq_aio.protocol.time_search import OffsetTimeSearch, require_aware, target_minute

__all__ = [
    "PositionedReader",
    "TimeOffset",
    "check_search_timeout",
    "check_times",
    "search_offset",
    "search_offsets",
]


class PositionedReader(Protocol):
    """The positioned reads a search needs (a
    :class:`~tubemq_aio.consumer.client_balanced.ClientBalancedConsumer`)."""

    async def read_at(self, partition_key: str, offset: int) -> PositionedRead:
        """The broker batch starting at ``offset`` (register + GetMessage + commit)."""
        ...

    async def read_next(self, partition_key: str, offset: int) -> PositionedRead:
        """The batch right after one just read, whose ``next_offset`` was ``offset``."""
        ...


@dataclass(frozen=True, slots=True)
class TimeOffset:
    """Where a partition's messages stamped at or after a time begin.

    Attributes:
        offset: the index offset to start reading at (right after the last message stamped
            before the time; the first message's own offset when none is).
        past_end: no message of the partition is stamped at or after the time; ``offset`` is
            then right after its last message (reading there yields only later messages).
        reads: positioned reads the search took.
    """

    offset: int
    past_end: bool
    reads: int


def check_times(times: object) -> dict[str, datetime]:
    """``times`` as ``{partition key: aware datetime}``.

    Raises:
        ConsumerConfigError: not a mapping, a key that is not a string, or a value that is not
            a timezone-aware datetime.
        UnknownPartitionError: a key that is not ``brokerId:topic:partitionId``.
    """
    if not isinstance(times, Mapping):
        raise ConsumerConfigError(
            "offsets_for_times takes a mapping partition key -> datetime, "
            f"got {type(times).__name__}"
        )
    out: dict[str, datetime] = {}
    for key, when in times.items():
        if not isinstance(key, str):
            raise ConsumerConfigError(f"partition key must be a string, got {key!r}")
        parse_key(key)  # a malformed key is refused before any request
        out[key] = require_aware(when, f"time of {key}")
    return out


def check_search_timeout(timeout: object, error: type[ConfigError]) -> float:
    """``offsets_for_times``'s ``timeout``: seconds in ``(0, 86400]``.

    Raises:
        ConfigError: (of class ``error``) anything else.
    """
    checks = Checks("offsets_for_times", error=error)
    seconds = checks.seconds("timeout", timeout, high=MAX_SECONDS)
    checks.done()
    return seconds


async def search_offset(
    reader: PositionedReader, partition_key: str, when: datetime, zone: tzinfo
) -> TimeOffset:
    """Find where ``partition_key``'s messages stamped at or after ``when`` begin.

    Each read moves ``reader``'s group offset of the partition (left at the last read's end)
    and leaves the partition registered as a reader of ``reader``.

    Raises:
        ConsumerConfigError: ``when`` is naive.
        PartitionAlreadyConnectedError: ``reader`` fetches the partition.
        ConsumeSpeedLimitedError / ServerError: a read failed.
    """
    search = OffsetTimeSearch(target_minute(when, zone))
    while (probe := search.next_probe()) is not None:
        got = await reader.read_at(partition_key, probe)
        start = got.start_offset
        # A read that found none of this partition's messages but moved on (its store's
        # other partitions filled the broker's read unit) is not the end: read on.
        while not got.messages and got.start_offset < got.next_offset < got.max_offset:
            got = await reader.read_next(partition_key, got.next_offset)
            start = got.start_offset if got.messages else start
        times = [m.msg_time for m in got.messages]
        search.observe(probe, start, got.next_offset, got.max_offset, times)
    return TimeOffset(search.offset, search.past_end, search.reads)


async def search_offsets(
    reader: PositionedReader,
    times: Mapping[str, datetime],
    zone: tzinfo,
    timeout: float,
    concurrency: int = 1,
) -> dict[str, TimeOffset]:
    """:func:`search_offset` for each partition within ``timeout`` s, at most ``concurrency``
    partitions at a time (each partition's reads stay one after the other).

    Returns:
        ``{partition key: TimeOffset}`` in the order of ``times``.

    Raises:
        RequestTimeoutError: the searches took longer than ``timeout``.
        The errors of :func:`search_offset`: the first one raised; the searches still running
        are then cancelled and waited for.
    """
    found: dict[str, TimeOffset] = {}
    queue = iter(times.items())  # shared by the workers: each partition searched once

    async def worker() -> None:
        for key, when in queue:
            found[key] = await search_offset(reader, key, when, zone)

    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(times)))]
            try:
                await asyncio.gather(*workers)
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
    except TimeoutError:
        if not scope.expired():
            raise  # an RPC's own timeout
        raise RequestTimeoutError(
            f"time search of {len(times)} partition(s) took longer than {timeout} s"
        ) from None
    return {key: found[key] for key in times}
