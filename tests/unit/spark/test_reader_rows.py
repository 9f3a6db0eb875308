"""Executor-side pure pieces: cutting a straddling batch, rows as Arrow (real pyarrow/PySpark
schema conversion, no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema

from tubemq_aio.models import Message
from tubemq_aio.spark._columns import MessageColumns
from tubemq_aio.spark._options import parse_source_options
from tubemq_aio.spark._reader import ReadChunk, _chunk, _cut, chunk_to_arrow, chunks_to_arrow
from tubemq_aio.spark.source import SCHEMA, TubeMQBatchReader

PARTITION = ("t", "1:t:0")


def msg(i: int, **kw: object) -> Message:
    """A message with id ``100 + i``."""
    return Message(topic="t", body=b"b%d" % i, message_id=100 + i, partition_key="1:t:0", **kw)  # type: ignore[arg-type]


def chunk(messages: list[Message], offsets: list[int]) -> ReadChunk:
    return ReadChunk(MessageColumns.of(messages), np.array(offsets, dtype=np.int64))


def ids(messages: list[Message]) -> Any:
    return MessageColumns.of(messages).message_ids


def test_cut_keeps_messages_before_the_first_at_the_end() -> None:
    batch = ids([msg(i) for i in range(5)])
    assert _cut(batch, 103) == 3
    assert _cut(batch, 100) == 0


def test_cut_keeps_everything_when_the_peek_is_empty_or_outside_the_batch() -> None:
    batch = ids([msg(i) for i in range(5)])
    assert _cut(batch, None) == 5
    assert _cut(batch, 109) == 5


def test_chunk_to_arrow_matches_the_schema_spark_expects() -> None:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    when = datetime(2026, 1, 2, 3, 4)  # naive local wall time, as decoded
    one = chunk(
        [msg(0, attributes={"k": "v"}, msg_type="red", msg_time=when, attribute="x"), msg(1)],
        [0, 28],
    )
    batch = chunk_to_arrow(one, schema, PARTITION)
    assert batch.schema.equals(schema)
    rows = batch.to_pylist()
    assert rows[0]["offset"] == 0
    assert rows[1]["offset"] == 28
    assert rows[0]["message_id"] == 100
    assert rows[0]["attributes"] == [("k", "v")]
    assert rows[1]["attributes"] == []
    assert rows[0]["msg_type"] == "red"
    assert rows[0]["msg_time"] == when.astimezone(UTC)
    assert rows[1]["msg_time"] is None
    assert rows[0]["body"] == b"b0"
    assert isinstance(batch, pa.RecordBatch)


def test_chunks_become_one_batch_with_shared_values_converted_once() -> None:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    when = datetime(2026, 1, 2, 3, 4)
    shared = {"k": "v"}
    first = chunk([msg(0, attributes=shared, msg_time=when, attribute="x"), msg(1)], [0, 28])
    plain = chunk([msg(3)], [84])
    second = chunk([msg(2, attributes=shared, msg_time=when, msg_type="red", attribute="x")], [56])
    assert plain.columns.msg_types is None  # no attribute block: the columns stay empty
    batch = chunks_to_arrow([first, second, plain], schema, PARTITION)
    assert batch.schema.equals(schema)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [0, 28, 56, 84]
    assert [r["message_id"] for r in rows] == [100, 101, 102, 103]
    assert [r["topic"] for r in rows] == ["t"] * 4
    assert [r["partition_key"] for r in rows] == ["1:t:0"] * 4
    assert [r["attributes"] for r in rows] == [[("k", "v")], [], [("k", "v")], []]
    utc = when.astimezone(UTC)
    assert [r["msg_time"] for r in rows] == [utc, None, utc, None]
    assert [r["msg_type"] for r in rows] == ["", "", "red", ""]
    assert [r["body"] for r in rows] == [b"b0", b"b1", b"b2", b"b3"]


def test_rows_without_attributes_or_times_and_no_rows_at_all() -> None:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    rows = chunks_to_arrow([chunk([msg(0), msg(1)], [0, 28])], schema, PARTITION).to_pylist()
    assert [r["attributes"] for r in rows] == [[], []]
    assert [r["msg_time"] for r in rows] == [None, None]
    assert [r["msg_type"] for r in rows] == ["", ""]
    assert [r["topic"] for r in rows] == ["t", "t"]
    empty = chunks_to_arrow([], schema, PARTITION)
    assert empty.num_rows == 0
    assert empty.schema.equals(schema)


def test_chunk_offsets_follow_the_batch_start_and_the_msg_type_filter() -> None:
    batch = MessageColumns.of(
        [msg(i, msg_type=t, attribute="x") for i, t in enumerate(["a", "b", "a"])]
    )
    every = _chunk(batch, 280, frozenset())
    assert every is not None
    assert every.offsets.tolist() == [280, 308, 336]
    only_a = _chunk(batch, 280, frozenset({"a"}))
    assert only_a is not None
    assert only_a.columns.message_ids.tolist() == [100, 102]
    assert only_a.columns.bodies.to_pylist() == [b"b0", b"b2"]
    assert only_a.offsets.tolist() == [280, 336]
    assert _chunk(batch, 0, frozenset({"z"})) is None
    assert _chunk(MessageColumns.of([]), 0, frozenset()) is None
    # No attribute block at all: every msgType is "" and a filter keeps nothing.
    assert _chunk(MessageColumns.of([msg(0)]), 0, frozenset({"a"})) is None


def test_the_task_pyspark_runs_when_no_range_was_planned_has_no_rows() -> None:
    # A batch read of an empty topic plans no partition; PySpark then runs one task with a
    # plain InputPartition(None), which failed the reader's type check (AssertionError).
    options = parse_source_options({"master": "127.0.0.1:8715", "topic": "t"}, streaming=False)
    assert list(TubeMQBatchReader(options).read(InputPartition(None))) == []
