"""The Spark sink: ``df.write.format("tubemq")`` and ``df.writeStream.format("tubemq")``.

:class:`~tubemq_aio.spark.TubeMQDataSource` returns the writers defined here. The driver
validates the options and the input columns when the writer is built (see
:func:`~tubemq_aio.spark._sink_plan.plan_sink`); each Spark task then runs one
:class:`~tubemq_aio.Producer` on an event loop of its own, sends its rows with at most
``maxInFlight`` sends outstanding, waits for every send before it returns, and fails (so Spark
fails or retries the task) on the first send that fails.

Delivery is **at-least-once**: a retried task or a re-run micro-batch sends its rows again, and
an aborted write cannot take back what was already stored. Streaming writes therefore tag every
message with the micro-batch id (attribute ``__spark_batch_id`` by default), so a consumer can
drop the repeats of a batch it has already seen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from tubemq_aio.checks import Checks
from tubemq_aio.errors import InvalidMessageError, SinkOptionError
from tubemq_aio.producer import Producer
from tubemq_aio.spark._sink_plan import (
    ArrowBatch,
    OutRow,
    SinkPlan,
    batch_rows,
    batch_topics,
    plan_sink,
)

__all__ = [
    "TubeMQBatchWriter",
    "TubeMQStreamWriter",
    "TubeMQWriteCommit",
    "write_task",
]

log = logging.getLogger("tubemq_aio.spark.sink")

#: Spark's local property that holds the id of the micro-batch a task belongs to.
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class TubeMQWriteCommit(WriterCommitMessage):
    """What one write task reports to the driver.

    Attributes:
        rows: messages the task sent and the brokers acknowledged.
        partition_id: the Spark partition the task wrote.
        attempt: the task's attempt number (0 for the first).
        batch_id: the micro-batch id of a streaming write, None for a batch write.
        seconds: wall time the task spent, producer start and close included.
    """

    rows: int
    partition_id: int
    attempt: int
    batch_id: int | None
    seconds: float


class _Feed:
    """The task's rows for the senders, batch after batch, without draining between batches.

    Senders share one row iterator (each ``next()`` completes without yielding the loop). A
    sender that finds it exhausted asks for a refill: the first one takes the next Arrow batch
    (already being pulled from Spark in a worker thread) and starts pulling the one after; the
    others see the new generation and carry on. So the in-flight window stays full across
    batch boundaries and reading the input overlaps with waiting for the brokers.
    """

    def __init__(
        self,
        producer: Producer,
        plan: SinkPlan,
        batches: Iterator[ArrowBatch],
        extra: dict[str, str],
    ) -> None:
        self.producer, self.plan, self.batches, self.extra = producer, plan, batches, extra
        self.rows: Iterator[OutRow] = iter(())
        self.generation = 0
        self.total = 0
        self.done = False
        self.lock = asyncio.Lock()
        self.pending = self._pull()

    def _pull(self) -> asyncio.Future[ArrowBatch | None]:
        return asyncio.ensure_future(asyncio.to_thread(next, self.batches, None))

    async def refill(self, seen: int) -> bool:
        """Make fresh rows available after generation ``seen``; False when the input ended."""
        async with self.lock:
            while self.generation == seen and not self.done:
                batch = await self.pending
                if batch is None:
                    self.done = True
                    break
                self.pending = self._pull()
                if not batch.num_rows:
                    continue
                # Publish new topics once, before the concurrent sends (older producers let
                # sends racing on a topic's first use fail with TopicUnavailableError).
                new = batch_topics(batch, self.plan).difference(self.producer.topics)
                if new:
                    await self.producer.publish(sorted(new))
                self.rows = batch_rows(batch, self.plan, self.extra, self.total)
                self.total += batch.num_rows
                self.generation += 1
            return self.generation != seen

    async def send_all(self) -> None:
        """Send rows until the input ends (one sender)."""
        send = self.producer.send
        while True:
            seen = self.generation
            for row in self.rows:
                try:
                    await send(
                        row.topic,
                        row.body,
                        attributes=row.attributes,
                        msg_type=row.msg_type,
                        msg_time=row.msg_time,
                        key=row.key,
                    )
                except InvalidMessageError as exc:  # the producer's refusal, without the row
                    raise type(exc)(f"row {row.row}: {exc}") from exc
            if not await self.refill(seen):
                return


async def _write_batches(
    plan: SinkPlan, batches: Iterator[ArrowBatch], extra: dict[str, str]
) -> int:
    """Send every row of ``batches`` through one producer with ``maxInFlight`` sends
    outstanding; return the number sent. The first failed send cancels the rest."""
    async with Producer(**plan.producer_kwargs()) as producer:
        feed = _Feed(producer, plan, batches, extra)
        tasks = [asyncio.create_task(feed.send_all()) for _ in range(plan.max_in_flight)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if not feed.pending.done():  # a failed send: let the thread finish its read first
                await asyncio.wait([feed.pending])
    return feed.total


def write_task(
    plan: SinkPlan, batches: Iterator[ArrowBatch], batch_id: int | None
) -> TubeMQWriteCommit:
    """Run one Spark write task: send every row of ``batches`` and wait for the brokers.

    Args:
        plan: the validated plan from the driver.
        batches: the task's input as Arrow record batches.
        batch_id: the micro-batch id of a streaming write (tagged onto each message when
            ``plan.batch_id_attribute`` is set), None for a batch write.

    Returns:
        The commit message for the driver.

    Raises:
        TubeMQError: a send failed (the task fails; rows sent before stay stored).
    """
    context = TaskContext.get()
    partition_id = context.partitionId() if context is not None else 0
    attempt = context.attemptNumber() if context is not None else 0
    extra: dict[str, str] = {}
    if batch_id is not None and plan.batch_id_attribute:
        extra[plan.batch_id_attribute] = str(batch_id)
    if plan.task_attribute:
        extra[plan.task_attribute] = f"{partition_id}:{attempt}"
    began = time.monotonic()
    rows = asyncio.run(_write_batches(plan, batches, extra))
    return TubeMQWriteCommit(rows, partition_id, attempt, batch_id, time.monotonic() - began)


def _batch_id_of_task() -> int | None:
    context = TaskContext.get()
    value = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return int(value) if value is not None else None


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, int]:
    """(rows, tasks that reported, tasks that failed) of a write's commit messages."""
    done = [m for m in messages if isinstance(m, TubeMQWriteCommit)]
    return sum(m.rows for m in done), len(done), len(messages) - len(done)


class TubeMQBatchWriter(DataSourceArrowWriter):
    """Writer of ``df.write.format("tubemq")`` (append only).

    Args:
        options: the Spark write options.
        schema: the schema of the DataFrame.
        overwrite: True for ``mode("overwrite")``, which a topic cannot honour.

    Raises:
        SinkOptionError: an option is invalid, or ``overwrite`` was asked for.
        SinkSchemaError: a column is missing, unknown or badly typed.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            checks = Checks("tubemq sink", error=SinkOptionError)
            checks.fail("save mode 'overwrite' is not possible for a TubeMQ topic; use 'append'")
        self.plan = plan_sink(options, schema)

    def write(self, iterator: Iterator[Any]) -> TubeMQWriteCommit:
        """Send the task's rows (runs on an executor)."""
        return write_task(self.plan, iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log the totals of a successful write (runs on the driver)."""
        rows, tasks, _ = _summary(messages)
        log.info("tubemq sink: wrote %d rows in %d tasks", rows, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log a failed write. Messages already stored stay in the topic (at-least-once)."""
        rows, tasks, failed = _summary(messages)
        log.warning(
            "tubemq sink: write aborted (%d tasks failed); %d rows from %d finished tasks "
            "stay stored",
            failed,
            rows,
            tasks,
        )


class TubeMQStreamWriter(DataSourceStreamArrowWriter):
    """Writer of ``df.writeStream.format("tubemq")``: each micro-batch's rows, tagged with its id.

    Args:
        options: the Spark write options.
        schema: the schema of the streaming DataFrame.
        overwrite: True in ``complete`` output mode; every micro-batch is still appended.

    Raises:
        SinkOptionError: an option is invalid.
        SinkSchemaError: a column is missing, unknown or badly typed.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.plan = plan_sink(options, schema)
        self.overwrite = overwrite

    def write(self, iterator: Iterator[Any]) -> TubeMQWriteCommit:
        """Send the task's rows of one micro-batch (runs on an executor)."""
        return write_task(self.plan, iterator, _batch_id_of_task())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log the totals of a micro-batch (runs on the driver)."""
        rows, tasks, _ = _summary(messages)
        log.info("tubemq sink: batch %d wrote %d rows in %d tasks", batchId, rows, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log a failed micro-batch. What was stored stays; the re-run sends it again."""
        rows, _, failed = _summary(messages)
        log.warning(
            "tubemq sink: batch %d aborted (%d tasks failed); %d rows already stored will "
            "be sent again by the re-run (same %s attribute)",
            batchId,
            failed,
            rows,
            self.plan.batch_id_attribute,
        )
