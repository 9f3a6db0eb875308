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
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.consumer.toolkit import BatchRead
from tubemq_aio.errors import (
    ConsumeSpeedLimitedError,
    DataLossError,
    PartitionNotSubscribableError,
    PartitionOccupiedError,
    TubeMQError,
)
from tubemq_aio.spark._columns import COLUMNS
from tubemq_aio.spark._message_columns import AttrInfo, MessageColumns
from tubemq_aio.spark._offsets import RECORD, OffsetRange
from tubemq_aio.spark._options import SourceOptions

__all__ = [
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


_Read = BatchRead[MessageColumns]
_Ints = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True, slots=True)
class ReadChunk:
    """Messages of one broker batch inside the range, with their ``offset`` column values.

    Attributes:
        columns: the messages kept (after the cut and the msgType filter).
        offsets: per message: batch start + ``RECORD`` × its index in the broker batch (exact
            when the partition has its store to itself, a lower bound otherwise).
    """

    columns: MessageColumns
    offsets: _Ints


def _cut(ids: _Ints, first_after: int | None) -> int:
    """How many messages of a straddling batch lie before the end: those before the first
    message at or after the end (by message id); all of them when there is none in the batch."""
    if first_after is None:
        return len(ids)
    hits = np.flatnonzero(ids == first_after)
    return int(hits[0]) if len(hits) else len(ids)


def _data_loss(options: SourceOptions, key: str, wanted: int, got: int) -> None:
    text = (
        f"partition {key}: offset {wanted} is no longer on the broker (it answered {got}); "
        "messages in between were deleted by retention"
    )
    if options.fail_on_data_loss:
        raise DataLossError(text + "; set failOnDataLoss=false to continue from there")
    log.warning("%s; continuing (failOnDataLoss=false)", text)


async def _unthrottled(
    read: Callable[[str, int], Awaitable[_Read]], key: str, offset: int
) -> _Read:
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
    read_at = partial(consumer.read_with, COLUMNS)
    read_next = partial(consumer.read_with, COLUMNS, sequential=True)
    peek_at = partial(consumer.read_with, COLUMNS, consume=False)
    ahead: asyncio.Task[_Read] | None = None
    try:
        batch = await _unthrottled(read_at, rng.key, offset)
        while True:
            if batch.start_offset > offset:
                _data_loss(options, rng.key, offset, batch.start_offset)
            columns = batch.items
            if batch.start_offset >= rng.end or (
                not len(columns) and batch.next_offset <= batch.start_offset
            ):
                return  # nothing more of this partition before the end
            straddles = batch.next_offset > rng.end
            if straddles:
                peek = (await _unthrottled(peek_at, rng.key, rng.end)).items
                first = int(peek.message_ids[0]) if len(peek) else None
                columns = columns.head(_cut(columns.message_ids, first))
            offset = batch.next_offset
            if not straddles and offset < rng.end:
                # Read ahead: the broker prepares the next batch while this one is handed on.
                ahead = asyncio.ensure_future(_unthrottled(read_next, rng.key, offset))
            chunk = _chunk(columns, batch.start_offset, types)
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


def _chunk(columns: MessageColumns, start: int, types: frozenset[str]) -> ReadChunk | None:
    """The kept messages of one broker batch with their offsets (None when none is kept)."""
    n = len(columns)
    if not n:
        return None
    offsets = np.arange(start, start + RECORD * n, RECORD, dtype=np.int64)
    if not types:
        return ReadChunk(columns, offsets)
    kept = np.flatnonzero(columns.of_types(types))
    if not len(kept):
        return None
    return ReadChunk(columns.take(kept), offsets[kept])


def _utc(value: datetime | None) -> datetime | None:
    # msg_time is a naive local wall time (minute precision): make it an instant.
    return None if value is None else value.astimezone(UTC)


def _same(value: str, n: int, type_: pa.DataType) -> pa.Array:
    """``n`` times the same string, built from two buffers (``pa.repeat`` costs ≈ 1 µs a row)."""
    data = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def _block_columns(chunks: Sequence[ReadChunk], n: int, types: list[pa.DataType]) -> list[pa.Array]:
    """The msg_type, msg_time and attributes columns: each chunk's table of distinct attribute
    blocks converted once, then taken row by row by Arrow."""
    if all(c.columns.blocks is None for c in chunks):
        return [
            _same("", n, types[0]),
            pa.nulls(n, types[1]),
            pa.MapArray.from_arrays(
                pa.array(np.zeros(n + 1, dtype=np.int32)),
                pa.array([], pa.string()),
                pa.array([], pa.string()),
                type=types[2],
            ),
        ]
    table: list[AttrInfo] = []
    parts: list[np.ndarray[Any, np.dtype[np.int32]]] = []
    for chunk in chunks:
        columns = chunk.columns
        blocks = columns.blocks
        if blocks is None:
            blocks = np.zeros(len(columns), dtype=np.int32)
        parts.append(blocks + np.int32(len(table)))
        table += columns.infos
    rows = pa.array(np.concatenate(parts))
    return [
        pa.array([info[2] for info in table], type=types[0]).take(rows),
        pa.array([_utc(info[3]) for info in table], type=types[1]).take(rows),
        pa.array([list(info[1].items()) for info in table], type=types[2]).take(rows),
    ]


def chunks_to_arrow(
    chunks: Sequence[ReadChunk], schema: pa.Schema, partition: tuple[str, str]
) -> pa.RecordBatch:
    """The rows of chunks as one Arrow batch of the source's schema (column order fixed:
    topic, partition_key, offset, message_id, msg_type, msg_time, attributes, body), built
    column by column from the chunks' columns, shared values converted once.

    Args:
        chunks: the chunks, in order.
        schema: the source's Arrow schema.
        partition: ``(topic, partition_key)`` of every message.
    """
    types = [f.type for f in schema]
    n = sum(len(c.columns) for c in chunks)
    bodies = [c.columns.bodies for c in chunks]
    arrays = [
        _same(partition[0], n, types[0]),
        _same(partition[1], n, types[1]),
        pa.array(_concat([c.offsets for c in chunks]), type=types[2]),
        pa.array(_concat([c.columns.message_ids for c in chunks]), type=types[3]),
        *_block_columns(chunks, n, types[4:7]),
        bodies[0]
        if len(bodies) == 1
        else pa.concat_arrays(bodies)
        if bodies
        else pa.array([], types[7]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _concat(parts: list[_Ints]) -> _Ints:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def chunk_to_arrow(
    chunk: ReadChunk, schema: pa.Schema, partition: tuple[str, str]
) -> pa.RecordBatch:
    """The rows of one chunk as an Arrow batch (see :func:`chunks_to_arrow`)."""
    return chunks_to_arrow([chunk], schema, partition)


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
    ``nbytes`` body bytes), in order; the last one holds what is left."""
    partition = (rng.key.split(":")[1], rng.key)
    held: list[ReadChunk] = []
    count = size = 0
    async for chunk in read_range(consumer, rng, options):
        held.append(chunk)
        bodies = chunk.columns.bodies
        count += len(bodies)
        size += bodies.nbytes  # bodies and their offsets: close enough to bound the batch
        if count >= rows or size >= nbytes:
            yield chunks_to_arrow(held, schema, partition)
            held, count, size = [], 0, 0
    if held:
        yield chunks_to_arrow(held, schema, partition)
