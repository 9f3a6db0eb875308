"""The PySpark data source ``tubemq``: batch and Structured Streaming reads (and the sink hooks).

``spark.dataSource.register(TubeMQDataSource)`` makes ``spark.read.format("tubemq")`` and
``spark.readStream.format("tubemq")`` available; options, offsets and guarantees are described in
``docs/spark.md``. Planning runs on the driver (:mod:`._planner`, :mod:`._offsets`); each input
partition is one partition key's ``[start, end)`` range, read on an executor by
:func:`._reader.read_range` through the sync bridge.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer
from tubemq_aio.errors import DataLossError
from tubemq_aio.spark._bridge import iterate_async
from tubemq_aio.spark._offsets import (
    OffsetRange,
    StoreBounds,
    lost_partitions,
    normalize_offsets,
    plan_end,
    plan_ranges,
    resolve_start,
)
from tubemq_aio.spark._options import SourceOptions, parse_source_options
from tubemq_aio.spark._planner import Planner, consumer_kwargs, fetch_bounds_once
from tubemq_aio.spark._reader import arrow_batches

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SCHEMA", "TubeMQDataSource", "TubeMQInputPartition"]

log = logging.getLogger("tubemq_aio.spark")

#: The rows of the source.
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition_key", StringType()),
        StructField("offset", LongType()),
        StructField("message_id", LongType()),
        StructField("msg_type", StringType()),
        StructField("msg_time", TimestampType()),
        StructField("attributes", MapType(StringType(), StringType())),
        StructField("body", BinaryType()),
    ]
)


class TubeMQInputPartition(InputPartition):
    """One Spark task: the messages of one partition key in ``[start, end)`` (pickled to the
    executor with the validated options)."""

    def __init__(self, options: SourceOptions, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.options = options
        self.range = rng

    def __repr__(self) -> str:
        return f"TubeMQInputPartition({self.range.key} [{self.range.start}, {self.range.end}))"


def _read(partition: TubeMQInputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: the range's rows as Arrow batches, on an event loop of this task."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    options, rng = partition.options, partition.range
    topic = rng.key.split(":")[1]

    async def batches() -> Any:
        kwargs = consumer_kwargs(options, options.group, [topic])
        async with ClientBalancedConsumer(**kwargs) as consumer:
            async for batch in arrow_batches(consumer, rng, options, schema):
                yield batch

    yield from iterate_async(batches, options.read_timeout)


def _resolve_start(
    options: SourceOptions, bounds: dict[str, StoreBounds], at_times: dict[str, int]
) -> dict[str, int]:
    """The first offsets of a query: the time search's (a partition it did not cover starts
    at its earliest offset) or ``startingOffsets``'."""
    if options.starting_times is not None:
        return resolve_start("json", at_times, bounds)
    return resolve_start(options.starting.kind, options.starting.as_dict(), bounds)


def _partitions(
    options: SourceOptions, start: dict[str, int], end: dict[str, int]
) -> list[TubeMQInputPartition]:
    ranges = plan_ranges(start, end, options.min_partitions)
    return [TubeMQInputPartition(options, r) for r in ranges]


class TubeMQBatchReader(DataSourceReader):
    """``spark.read.format("tubemq")``: ``startingOffsets`` (default earliest) up to
    ``endingOffsets`` (default latest), fixed when the query is planned."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One input partition per partition key with messages in the range."""
        opts = self.options
        bounds, at_times = fetch_bounds_once(opts)
        start = _resolve_start(opts, bounds, at_times)
        explicit_end = opts.ending.as_dict() if opts.ending.kind == "json" else {}
        end = {k: explicit_end.get(k, b.max_offset) for k, b in bounds.items()}
        for key, offset in explicit_end.items():
            end.setdefault(key, offset)
        return _partitions(opts, start, normalize_offsets(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: the rows of one range. When :meth:`partitions` planned none (an
        empty topic, or nothing between the start and the end), PySpark runs one task with a
        plain ``InputPartition(None)``: it has no rows."""
        if type(partition) is InputPartition and partition.value is None:
            return iter(())
        assert isinstance(partition, TubeMQInputPartition)
        return _read(partition)


class TubeMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("tubemq")`` with admission control (``maxOffsetsPerTrigger``)
    and ``Trigger.AvailableNow``.

    Offsets are ``{partition_key: index offset}`` dicts with sorted keys. The driver's planner
    consumer and its portal thread live until :meth:`stop`.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner = Planner(options)
        self._target: dict[str, int] | None = None

    def _bounds(self) -> dict[str, StoreBounds]:
        bounds = self._planner.bounds()
        if self._target is None:
            return bounds
        # AvailableNow: nothing past the store ends seen when the query started, and no
        # partition that appeared later.
        return {
            key: StoreBounds(b.min_offset, min(b.max_offset, self._target[key]))
            for key, b in bounds.items()
            if key in self._target
        }

    def prepareForTriggerAvailableNow(self) -> None:
        """Record every store's end now: the query reads up to there (in batches bounded by
        ``maxOffsetsPerTrigger``) and then ends."""
        self._target = {key: b.max_offset for key, b in self._planner.bounds().items()}

    def initialOffset(self) -> dict[str, int]:
        """Where a new query starts: ``startingOffsets`` (or the starting time) resolved
        against the brokers."""
        opts = self.options
        at_times = self._planner.start_offsets() if opts.starting_times is not None else {}
        return _resolve_start(opts, self._bounds(), at_times)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when set, else ``ReadAllAvailable``."""
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        """The end of the next micro-batch: the stores' ends, bounded by ``limit``.

        Raises:
            DataLossError: a start offset is no longer on the broker and ``failOnDataLoss``.
        """
        begin = normalize_offsets(start)
        bounds = self._bounds()
        lost = lost_partitions(begin, bounds)
        if lost:
            text = ", ".join(f"{k}@{begin[k]} (now {bounds[k]})" for k in lost)
            if self.options.fail_on_data_loss:
                raise DataLossError(f"offsets no longer on the broker: {text}")
            log.warning("offsets no longer on the broker, continuing: %s", text)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return plan_end(begin, bounds, max_rows)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One input partition per partition key that moved; ``[]`` when ``start == end``."""
        return _partitions(self.options, normalize_offsets(start), normalize_offsets(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: the rows of one range."""
        assert isinstance(partition, TubeMQInputPartition)
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not in the group."""

    def stop(self) -> None:
        """Close the planner consumer and its portal thread."""
        self._planner.stop()


class TubeMQDataSource(DataSource):
    """The ``tubemq`` data source: ``spark.dataSource.register(TubeMQDataSource)``.

    Reads (batch and streaming) are built here; writes come from :mod:`tubemq_aio.spark.sink`.
    """

    @classmethod
    def name(cls) -> str:
        """The short name used in ``format("tubemq")``."""
        return "tubemq"

    def schema(self) -> StructType:
        """The source's columns (the sink reads ``body`` and optional extra columns)."""
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A bounded batch reader (options validated here, on the driver)."""
        return TubeMQBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch stream reader (options validated here, on the driver)."""
        return TubeMQStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """The batch sink (:class:`tubemq_aio.spark.sink.TubeMQBatchWriter`)."""
        from tubemq_aio.spark.sink import TubeMQBatchWriter

        return TubeMQBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """The streaming sink (:class:`tubemq_aio.spark.sink.TubeMQStreamWriter`)."""
        from tubemq_aio.spark.sink import TubeMQStreamWriter

        return TubeMQStreamWriter(dict(self.options), schema, overwrite)
