"""Executor-side pure pieces: cutting a straddling batch, rows as Arrow (real pyarrow/PySpark
schema conversion, no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from tubemq_aio.models import Message
from tubemq_aio.spark._reader import ReadChunk, _chunk, _cut, chunk_to_arrow, chunks_to_arrow
from tubemq_aio.spark.source import SCHEMA


def msg(i: int, **kw: object) -> Message:
    """A message with id ``100 + i``."""
    return Message(topic="t", body=b"b%d" % i, message_id=100 + i, partition_key="1:t:0", **kw)  # type: ignore[arg-type]


def test_cut_keeps_messages_before_the_first_at_the_end() -> None:
    batch = [msg(i) for i in range(5)]
    assert _cut(batch, msg(3)) == 3
    assert _cut(batch, msg(0)) == 0


def test_cut_keeps_everything_when_the_peek_is_empty_or_outside_the_batch() -> None:
    batch = [msg(i) for i in range(5)]
    assert _cut(batch, None) == 5
    assert _cut(batch, msg(9)) == 5


def test_chunk_to_arrow_matches_the_schema_spark_expects() -> None:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    when = datetime(2026, 1, 2, 3, 4)  # naive local wall time, as decoded
    chunk = ReadChunk(
        (
            msg(0, attributes={"k": "v"}, msg_type="red", msg_time=when),
            msg(1),
        ),
        (0, 28),
    )
    batch = chunk_to_arrow(chunk, schema)
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
    first = ReadChunk((msg(0, attributes=shared, msg_time=when), msg(1)), (0, 28))
    second = ReadChunk((msg(2, attributes=shared, msg_time=when, msg_type="red"),), (56,))
    batch = chunks_to_arrow([first, second], schema, ("t", "1:t:0"))
    assert batch.schema.equals(schema)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [0, 28, 56]
    assert [r["message_id"] for r in rows] == [100, 101, 102]
    assert [r["topic"] for r in rows] == ["t"] * 3
    assert [r["partition_key"] for r in rows] == ["1:t:0"] * 3
    assert [r["attributes"] for r in rows] == [[("k", "v")], [], [("k", "v")]]
    assert [r["msg_time"] for r in rows] == [when.astimezone(UTC), None, when.astimezone(UTC)]
    assert [r["msg_type"] for r in rows] == ["", "", "red"]
    assert [r["body"] for r in rows] == [b"b0", b"b1", b"b2"]
    # Without the partition hint the columns come from the messages themselves.
    assert chunks_to_arrow([first, second], schema).to_pylist() == rows


def test_rows_without_attributes_or_times_and_no_rows_at_all() -> None:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    rows = chunks_to_arrow([ReadChunk((msg(0), msg(1)), (0, 28))], schema).to_pylist()
    assert [r["attributes"] for r in rows] == [[], []]
    assert [r["msg_time"] for r in rows] == [None, None]
    empty = chunks_to_arrow([], schema)
    assert empty.num_rows == 0
    assert empty.schema.equals(schema)


def test_chunk_offsets_follow_the_batch_start_and_the_msg_type_filter() -> None:
    batch = [msg(0, msg_type="a"), msg(1, msg_type="b"), msg(2, msg_type="a")]
    every = _chunk(batch, 280, frozenset())
    assert every is not None
    assert every.offsets == (280, 308, 336)
    only_a = _chunk(batch, 280, frozenset({"a"}))
    assert only_a is not None
    assert [m.message_id for m in only_a.messages] == [100, 102]
    assert only_a.offsets == (280, 336)
    assert _chunk(batch, 0, frozenset({"z"})) is None
    assert _chunk([], 0, frozenset()) is None
