"""PySpark's own floor for a Python data source: ``format("tubemq_floor")``.

Same schema as the ``tubemq`` source; each task yields one ready-made Arrow batch (built once
per task, ``batchRows`` rows of ``size``-byte bodies) again and again until it has produced its
share of ``rows``. No network, no decoding: what is left is Spark's cost of running a Python
data source (worker start-up, task scheduling, the Arrow transfer into the JVM). Batch reads
and micro-batch streams (with ``Trigger.AvailableNow``) are both supported.

As a sink (``df.write.format("tubemq_floor")``) each task takes its Arrow batches from Spark
and drops them, counting rows: Spark's cost of handing rows to a Python data sink, the floor of
the ``tubemq`` sink.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from tubemq_aio.spark.source import SCHEMA

__all__ = ["FloorCommit", "FloorDataSource", "count_rows", "prepared_batch"]


def prepared_batch(rows: int, size: int) -> pa.RecordBatch:
    """One Arrow batch of the source's schema: ``rows`` rows with ``size``-byte bodies."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    body = b"x" * size
    now = datetime.now(UTC)
    columns: list[list[Any]] = [
        ["floor"] * rows,
        ["0:floor:0"] * rows,
        list(range(rows)),
        list(range(rows)),
        [""] * rows,
        [now] * rows,
        [[]] * rows,
        [body] * rows,
    ]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _Share(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start, self.end = start, end


def _shares(start: int, end: int, parts: int) -> list[_Share]:
    step = -(-(end - start) // parts) if end > start else 0
    return [_Share(s, min(end, s + step)) for s in range(start, end, step)] if step else []


def _yield(share: _Share, batch_rows: int, size: int) -> Iterator[pa.RecordBatch]:
    batch = prepared_batch(batch_rows, size)
    left = share.end - share.start
    while left > 0:
        out = batch if left >= batch_rows else batch.slice(0, left)
        left -= out.num_rows
        yield out


class _Options:
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options.get("rows", "100000"))
        self.partitions = int(options.get("partitions", "4"))
        self.size = int(options.get("size", "1024"))
        self.batch_rows = int(options.get("batchRows", options.get("batchrows", "10000")))


class _BatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return _shares(0, self.opts.rows, self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Share)
        return _yield(partition, self.opts.batch_rows, self.opts.size)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to record: the stream is always ``rows`` long."""

    def initialOffset(self) -> dict[str, int]:
        return {"i": 0}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, int]:
        return {"i": self.opts.rows}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return _shares(int(start["i"]), int(end["i"]), self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Share)
        return _yield(partition, self.opts.batch_rows, self.opts.size)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to commit."""


@dataclass(frozen=True, slots=True)
class FloorCommit(WriterCommitMessage):
    """What one sink-floor task reports: the rows it was handed."""

    rows: int


def count_rows(batches: Iterator[pa.RecordBatch]) -> FloorCommit:
    """Take every batch of a task and drop it; the row count."""
    return FloorCommit(sum(batch.num_rows for batch in batches))


class _Writer(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> FloorCommit:
        return count_rows(iterator)


class FloorDataSource(DataSource):
    """``format("tubemq_floor")``: options ``rows``, ``partitions``, ``size``, ``batchRows``."""

    @classmethod
    def name(cls) -> str:
        """The short name."""
        return "tubemq_floor"

    def schema(self) -> StructType:
        """The ``tubemq`` source's schema."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader of ``rows`` rows."""
        return _BatchReader(_Options(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A stream of ``rows`` rows, all available at once."""
        return _StreamReader(_Options(dict(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """A sink that drops every row it is handed."""
        return _Writer()
