"""Finding the offset of a point in time in a partition (docs/protocol/time.md).

No broker call answers "which offset was stored at time T" for a client: the store's own
time index is only used by a broker admin page for a group's offset history, and neither
``GetMessage`` nor the broker web API returns a message's store time. The only time a consumer
sees is the producer's ``msgTime`` (``$msgTime$``, ``yyyyMMddHHmm``, one-minute granularity).
So the search is client-side: a bisection over the partition's index offsets, one positioned
read (register + GetMessage + commit) per step, using the ``msg_time`` of the messages each read
returns. :class:`OffsetTimeSearch` is that bisection as a pure state machine; the consumer
drives it with reads.

What it finds (docs/protocol/time.md §2): the smallest offset ``o`` such that every message of
the partition read from ``o`` on has a ``msg_time`` at or after the target minute, i.e. the
offset right after the last message stamped before the target. With ``msg_time`` never
decreasing along the partition (one producer clock, or several within a minute of each
other), reading from ``o`` yields exactly the messages stamped at or after the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo

from tubemq_aio.errors import ConsumerConfigError
from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "OffsetTimeSearch",
    "parse_time_text",
    "require_aware",
    "target_minute",
]


#: The times a search, a reset or a start position takes: a day inside datetime's own range,
#: so that any zone (a producer's ``msg_time`` zone, a group's) can take them; beyond it the
#: conversion overflows.
EARLIEST_TIME = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
LATEST_TIME = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def require_aware(when: object, what: str) -> datetime:
    """``when`` if it is a timezone-aware :class:`datetime` within
    [:data:`EARLIEST_TIME`, :data:`LATEST_TIME`].

    Args:
        when: the value to check.
        what: its name in the error message (``"consume_from"``, ``"offsets_for_times"``).

    Raises:
        ConsumerConfigError: not a datetime, a naive one (its zone would be a guess), or one
            outside 0001-01-02 .. 9999-12-30 UTC.
    """
    if not isinstance(when, datetime):
        raise ConsumerConfigError(f"{what} must be a datetime, got {type(when).__name__}")
    if when.tzinfo is None or when.tzinfo.utcoffset(when) is None:
        raise ConsumerConfigError(
            f"{what} must be timezone-aware (e.g. datetime(..., tzinfo=timezone.utc)), "
            f"got the naive {when.isoformat()}"
        )
    if not EARLIEST_TIME <= when <= LATEST_TIME:
        raise ConsumerConfigError(
            f"{what} must be between 0001-01-02 and 9999-12-30 (UTC), got {when.isoformat()}"
        )
    return when


def target_minute(when: datetime, zone: tzinfo = UTC) -> datetime:
    """The naive ``msg_time`` minute a search for ``when`` compares messages with.

    ``msg_time`` is a wall time without a zone, written by the producer in ``zone`` (the Java
    producer uses its local zone; tubemq-aio's default is UTC), one-minute granular: a message
    stamped ``10:05`` was sent within ``[10:05, 10:06)``. ``when`` is converted to ``zone`` and
    floored to its minute, so a search for ``10:05:30`` includes the messages stamped ``10:05``
    (a time search errs towards reading a few seconds more, never less).

    Raises:
        ConsumerConfigError: ``when`` is naive or not a datetime.
    """
    local = require_aware(when, "time").astimezone(zone)
    return local.replace(second=0, microsecond=0, tzinfo=None)


def parse_time_text(text: str) -> datetime:
    """An RFC 3339 / ISO 8601 time with a zone (``2026-11-29T10:00:00Z``, ``...+08:00``).

    A leading ``@`` (the CLI's marker of a time offset) is dropped.

    Raises:
        ConsumerConfigError: not a valid time, one without a zone, or one outside
            0001-01-02 .. 9999-12-30 UTC (see :func:`require_aware`).
    """
    raw = text.strip().removeprefix("@")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ConsumerConfigError(
            f"invalid time {text!r}: want RFC 3339, e.g. 2026-11-29T10:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise ConsumerConfigError(f"time {text!r} has no zone: add Z or an offset such as +08:00")
    return require_aware(when, f"time {text!r}")


@dataclass(slots=True)
class OffsetTimeSearch:
    """Bisection over one partition's index offsets for the first message at/after a minute.

    Drive it: while :meth:`next_probe` returns an offset, read the batch there (a positioned
    read that reports the batch's start, the offset after it and the store's max offset) and
    pass what came back to :meth:`observe`; then :attr:`offset` is the answer and
    :attr:`past_end` tells whether no message of the partition is stamped at or after the
    target. The first probe is at offset 0 (the broker clamps it to the store's min), so a
    target before the oldest kept message costs one read and answers that message's exact
    offset.

    Invariant: ``low <= answer <= high``, where the answer is the offset right after the last
    message stamped before the target. A read at ``o`` whose first message is at or after the
    target proves ``answer <= o``; one whose first ``j`` messages (from its start ``s``) are
    before it proves ``answer >= s + 28 * j`` (each message takes at least one 28-byte index
    slot), and when the batch also holds a later message, ``answer <= next - 28 * (k - j)``
    for a batch of ``k``. Every probe lies in ``[low, high)`` and moves one bound past itself,
    so the search ends after at most ``log2((max - min) / 28) + 1`` reads, fewer when batches
    hold many messages.

    Messages without a ``msg_time`` count as at or after any target: a search over an
    unstamped partition answers its first offset (it rewinds rather than skips).

    Attributes:
        target: the naive minute from :func:`target_minute`.
        low: smallest offset the answer may still be.
        high: largest offset the answer may still be (``None`` until the first read).
        reads: positioned reads observed so far.
    """

    target: datetime
    low: int = 0
    high: int | None = None
    reads: int = 0
    _seen_after: bool = field(default=False, repr=False)

    def next_probe(self) -> int | None:
        """The offset to read next, or ``None`` when the search is done."""
        if self.high is None:
            return 0
        span = self.high - self.low
        if span < INDEX_MSG_UNIT_SIZE:
            return None
        return self.low + INDEX_MSG_UNIT_SIZE * (span // (2 * INDEX_MSG_UNIT_SIZE))

    def observe(
        self,
        probe: int,
        start: int,
        next_offset: int,
        max_offset: int,
        times: Sequence[datetime | None],
    ) -> None:
        """Take in the read at ``probe``.

        Args:
            probe: the offset :meth:`next_probe` returned.
            start: the batch's start offset (``>= probe``; the store's min on the first read).
            next_offset: the offset right after the batch (== ``start`` when empty).
            max_offset: the store's max offset reported with the read.
            times: each message's naive ``msg_time`` in batch order (``None``: unstamped).
        """
        self.reads += 1
        first = self.high is None
        if first:
            self.low, self.high = start, max(max_offset, start)
        assert self.high is not None
        before = 0
        for when in times:
            if when is None or when >= self.target:
                break
            before += 1
        if before < len(times):
            self._seen_after = True
        if before == 0:
            # Nothing (the end) or an at-or-after message first: the answer is at most here.
            # On the first read, ``start`` is the partition's first message: exact.
            self.high = min(self.high, start if first else probe)
            return
        self.low = max(self.low, start + INDEX_MSG_UNIT_SIZE * before)
        if before < len(times):
            self.high = min(self.high, next_offset - INDEX_MSG_UNIT_SIZE * (len(times) - before))
        self.high = max(self.high, self.low)

    @property
    def done(self) -> bool:
        """Whether :meth:`next_probe` has nothing more to read."""
        return self.next_probe() is None

    @property
    def offset(self) -> int:
        """The answer once :attr:`done`: where reading yields exactly the later messages."""
        assert self.high is not None, "no read observed yet"
        return self.high

    @property
    def past_end(self) -> bool:
        """Whether the search is done without any message stamped at or after the target
        (:attr:`offset` is then right after the partition's last message: reading from it
        yields only messages stored later)."""
        return self.done and not self._seen_after
