"""Executor side of the Spark source: read one partition's ``[start, end)`` exactly.

A task owns a :class:`~tubemq_aio.consumer.client_balanced.ClientBalancedConsumer` of the
query's group for its lifetime and walks the range with positioned reads (``read_at``: the same
offset always gives the same broker batch). The broker reports no per-message offsets, only a
batch's start and (after the commit) its end, so the last batch may run past ``end``
("straddle"). The cut is found exactly by peeking at ``end``: the first message of the partition
at or after ``end`` (a read rolled back, so the group's offset is left at ``end``); the
straddling batch keeps the messages before that message id (ids are unique per broker). An empty
peek means every message of the batch lies before ``end``.

``msgTypes`` filtering happens here, after the cut, not at the broker: on the real broker a
filtered positioned read returned an empty answer for a range holding matching messages (the
same register + GetMessage returned them moments later), which would end a range early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from tubemq_aio.consumer.client_balanced import (
    ClientBalancedConsumer,
    PartitionNotSubscribableError,
    PositionedRead,
)
from tubemq_aio.errors import (
    ConsumeSpeedLimitedError,
    DataLossError,
    PartitionOccupiedError,
)
from tubemq_aio.models import Message
from tubemq_aio.spark._offsets import RECORD, OffsetRange
from tubemq_aio.spark._options import SourceOptions

__all__ = ["DataLossError", "ReadChunk", "chunk_to_arrow", "read_range"]

log = logging.getLogger("tubemq_aio.spark")

#: First and longest pause after the broker throttled a read (452) or refused it because another
#: consumer of the group still holds the partition (410: e.g. the task of a killed driver, kept
#: by the broker until its 30 s registration timeout); the task's read timeout bounds the wait.
_RETRY_PAUSE = (0.1, 2.0)

#: The refusals worth waiting out. After a 410 the client refuses to register the partition
#: again for 5 s (421, ``PartitionNotSubscribableError``), as the Java client does.
_RETRIED = (ConsumeSpeedLimitedError, PartitionOccupiedError, PartitionNotSubscribableError)


@dataclass(frozen=True, slots=True)
class ReadChunk:
    """Messages of one broker batch inside the range, with their ``offset`` column values.

    Attributes:
        messages: the messages kept (after the cut and the msgType filter).
        offsets: per message: batch start + ``RECORD`` × its index in the broker batch (exact
            when the partition has its store to itself, a lower bound otherwise).
    """

    messages: tuple[Message, ...]
    offsets: tuple[int, ...]


def _cut(batch: Sequence[Message], first_after: Message | None) -> int:
    """How many messages of a straddling batch lie before the end: those before the first
    message at or after the end (by message id); all of them when there is none in the batch."""
    if first_after is None:
        return len(batch)
    for i, message in enumerate(batch):
        if message.message_id == first_after.message_id:
            return i
    return len(batch)


def _data_loss(options: SourceOptions, key: str, wanted: int, got: int) -> None:
    text = (
        f"partition {key}: offset {wanted} is no longer on the broker (it answered {got}); "
        "messages in between were deleted by retention"
    )
    if options.fail_on_data_loss:
        raise DataLossError(text + "; set failOnDataLoss=false to continue from there")
    log.warning("%s; continuing (failOnDataLoss=false)", text)


async def _unthrottled(
    read: Callable[[str, int], Awaitable[PositionedRead]], key: str, offset: int
) -> PositionedRead:
    """Run a positioned read, pausing and retrying while the broker throttles the group or
    another member still holds the partition."""
    pause, longest = _RETRY_PAUSE
    while True:
        try:
            return await read(key, offset)
        except _RETRIED as exc:
            log.info("read of %s refused (%r); retrying in %.1f s", key, exc, pause)
            await asyncio.sleep(pause)
            pause = min(longest, pause * 2)


async def read_range(
    consumer: ClientBalancedConsumer, rng: OffsetRange, options: SourceOptions
) -> AsyncIterator[ReadChunk]:
    """Yield the messages of ``rng.key`` with offsets in ``[rng.start, rng.end)``, batch by batch.

    The group's stored offset is left at or before ``rng.end``.

    A read the broker throttles (452) or refuses because the partition is still held by another
    member of the group (410, then 421 for 5 s) is retried after a pause (the bridge's per-item
    timeout bounds the wait).

    Raises:
        DataLossError: ``rng.start`` was deleted and ``failOnDataLoss`` is true.
        ServerError: a broker call failed.
    """
    types = frozenset(options.msg_types)
    offset = rng.start
    while offset < rng.end:
        batch = await _unthrottled(consumer.read_at, rng.key, offset)
        if batch.start_offset > offset:
            _data_loss(options, rng.key, offset, batch.start_offset)
        if batch.start_offset >= rng.end or (
            not batch.messages and batch.next_offset <= batch.start_offset
        ):
            return  # nothing more of this partition before the end
        messages: Sequence[Message] = batch.messages
        straddles = batch.next_offset > rng.end
        if straddles:
            peek = await _unthrottled(consumer.peek_at, rng.key, rng.end)
            messages = messages[: _cut(messages, peek.messages[0] if peek.messages else None)]
        kept = [
            (m, batch.start_offset + RECORD * i)
            for i, m in enumerate(messages)
            if not types or m.msg_type in types
        ]
        if kept:
            yield ReadChunk(tuple(m for m, _ in kept), tuple(o for _, o in kept))
        if straddles:
            return
        offset = batch.next_offset


def _utc(value: datetime | None) -> datetime | None:
    # msg_time is a naive local wall time (minute precision): make it an instant.
    return None if value is None else value.astimezone(UTC)


def chunk_to_arrow(chunk: ReadChunk, schema: pa.Schema) -> pa.RecordBatch:
    """The rows of a chunk as an Arrow batch of the source's schema (column order fixed:
    topic, partition_key, offset, message_id, msg_type, msg_time, attributes, body)."""
    ms = chunk.messages
    columns: list[list[Any]] = [
        [m.topic for m in ms],
        [m.partition_key for m in ms],
        list(chunk.offsets),
        [m.message_id for m in ms],
        [m.msg_type for m in ms],
        [_utc(m.msg_time) for m in ms],
        [list(m.attributes.items()) for m in ms],
        [m.body for m in ms],
    ]
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
