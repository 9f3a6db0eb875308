"""Executor-side pure pieces: cutting a straddling batch, rows as Arrow (real pyarrow/PySpark
schema conversion, no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from tubemq_aio.models import Message
from tubemq_aio.spark._reader import ReadChunk, _cut, chunk_to_arrow
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
