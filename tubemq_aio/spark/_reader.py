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
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

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
    TubeMQError,
)
from tubemq_aio.models import Message
from tubemq_aio.spark._offsets import RECORD, OffsetRange
from tubemq_aio.spark._options import SourceOptions

__all__ = [
    "DataLossError",
    "ReadChunk",
    "arrow_batches",
    "chunk_to_arrow",
    "chunks_to_arrow",
    "read_range",
]

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

    The first batch is a positioned read (``read_at``); the following ones continue from where
    it left the broker's cursor (``read_next``: no register), and the next batch is already
    being read while the caller handles the current one.

    A read the broker throttles (452) or refuses because the partition is still held by another
    member of the group (410, then 421 for 5 s) is retried after a pause (the bridge's per-item
    timeout bounds the wait).

    Raises:
        DataLossError: ``rng.start`` was deleted and ``failOnDataLoss`` is true.
        ServerError: a broker call failed.
    """
    types = frozenset(options.msg_types)
    offset = rng.start
    ahead: asyncio.Task[PositionedRead] | None = None
    try:
        batch = await _unthrottled(consumer.read_at, rng.key, offset)
        while True:
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
            offset = batch.next_offset
            if not straddles and offset < rng.end:
                # Read ahead: the broker prepares the next batch while this one is handed on.
                ahead = asyncio.ensure_future(_unthrottled(consumer.read_next, rng.key, offset))
            chunk = _chunk(messages, batch.start_offset, types)
            if chunk is not None:
                yield chunk
            if ahead is None:
                return
            batch, ahead = await ahead, None
    finally:
        if ahead is not None:
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError, TubeMQError):
                await ahead


def _chunk(messages: Sequence[Message], start: int, types: frozenset[str]) -> ReadChunk | None:
    """The kept messages of one broker batch with their offsets (None when none is kept)."""
    if not types:
        if not messages:
            return None
        offsets = range(start, start + RECORD * len(messages), RECORD)
        return ReadChunk(tuple(messages), tuple(offsets))
    kept = [(m, start + RECORD * i) for i, m in enumerate(messages) if m.msg_type in types]
    if not kept:
        return None
    return ReadChunk(tuple(m for m, _ in kept), tuple(o for _, o in kept))


def _utc(value: datetime | None) -> datetime | None:
    # msg_time is a naive local wall time (minute precision): make it an instant.
    return None if value is None else value.astimezone(UTC)


def _times(ms: Sequence[Message], n: int, type_: pa.DataType) -> pa.Array:
    values = [m.msg_time for m in ms]
    distinct = set(values)
    if distinct == {None}:
        return pa.nulls(n, type_)
    # Few distinct times (minute precision, shared by the decode cache): convert each once.
    utc = {v: _utc(v) for v in distinct}
    return pa.array([utc[v] for v in values], type=type_)


def _attributes(ms: Sequence[Message], type_: pa.DataType) -> pa.Array:
    maps = [m.attributes for m in ms]
    if not any(maps):
        return pa.MapArray.from_arrays(
            pa.array([0] * (len(maps) + 1), pa.int32()),
            pa.array([], pa.string()),
            pa.array([], pa.string()),
            type=type_,
        )
    # Messages of one producer share one mapping (the decode cache): list its items once.
    items: dict[int, list[tuple[str, str]]] = {}
    rows = []
    for a in maps:
        got = items.get(id(a))
        if got is None:
            got = items[id(a)] = list(a.items())
        rows.append(got)
    return pa.array(rows, type=type_)


def chunks_to_arrow(
    chunks: Sequence[ReadChunk], schema: pa.Schema, partition: tuple[str, str] | None = None
) -> pa.RecordBatch:
    """The rows of chunks as one Arrow batch of the source's schema (column order fixed:
    topic, partition_key, offset, message_id, msg_type, msg_time, attributes, body), built
    column by column, shared values converted once.

    Args:
        chunks: the chunks, in order.
        schema: the source's Arrow schema.
        partition: ``(topic, partition_key)`` of every message when the caller knows they all
            come from one partition (the two columns are then filled without looking).
    """
    ms: list[Message] = []
    offsets: list[int] = []
    for chunk in chunks:
        ms += chunk.messages
        offsets += chunk.offsets
    n = len(ms)
    types = [f.type for f in schema]

    def same(value: str, i: int) -> pa.Array:
        return pa.repeat(pa.scalar(value, types[i]), n)

    if partition is not None:
        topic, key = same(partition[0], 0), same(partition[1], 1)
    else:
        topic = pa.array([m.topic for m in ms], type=types[0])
        key = pa.array([m.partition_key for m in ms], type=types[1])
    arrays = [
        topic,
        key,
        pa.array(offsets, type=types[2]),
        pa.array([m.message_id for m in ms], type=types[3]),
        pa.array([m.msg_type for m in ms], type=types[4]),
        _times(ms, n, types[5]),
        _attributes(ms, types[6]),
        pa.array([m.body for m in ms], type=types[7]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def chunk_to_arrow(chunk: ReadChunk, schema: pa.Schema) -> pa.RecordBatch:
    """The rows of one chunk as an Arrow batch (see :func:`chunks_to_arrow`)."""
    return chunks_to_arrow([chunk], schema)


#: A task hands Spark one Arrow batch per this many rows (or body bytes), not one per broker
#: batch (≈ 280 × 1 KB): Spark's cost per batch is then paid ≈ 35 times less often.
COALESCE_ROWS = 10_000
COALESCE_BYTES = 16 * 2**20


async def arrow_batches(
    consumer: ClientBalancedConsumer,
    rng: OffsetRange,
    options: SourceOptions,
    schema: pa.Schema,
    *,
    rows: int = COALESCE_ROWS,
    nbytes: int = COALESCE_BYTES,
) -> AsyncIterator[pa.RecordBatch]:
    """The rows of :func:`read_range` as Arrow batches of about ``rows`` rows (or about
    ``nbytes`` body bytes, estimated from each broker batch's first body), in order; the last
    one holds what is left."""
    partition = (rng.key.split(":")[1], rng.key)
    held: list[ReadChunk] = []
    count = size = 0
    async for chunk in read_range(consumer, rng, options):
        held.append(chunk)
        n = len(chunk.messages)
        count += n
        size += n * len(chunk.messages[0].body)  # an estimate is enough to bound the batch
        if count >= rows or size >= nbytes:
            yield chunks_to_arrow(held, schema, partition)
            held, count, size = [], 0, 0
    if held:
        yield chunks_to_arrow(held, schema, partition)
