"""The sink's senders keep the window full across Arrow batches (a fake producer records
what was sent and how many sends were outstanding; no Spark, no cluster)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from tubemq_aio.errors import InvalidMessageError, MessageTooLargeError, ServerError
from tubemq_aio.spark._sink_plan import plan_sink
from tubemq_aio.spark.sink import _Feed

PLAN = plan_sink(
    {"master": "127.0.0.1:8715", "topic": "t", "maxInFlight": "8"},
    StructType([StructField("body", BinaryType())]),
)


class FakeProducer:
    """Records bodies and the largest number of sends outstanding at once."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.topics: set[str] = set()
        self.published: list[list[str]] = []
        self.bodies: list[bytes] = []
        self.outstanding = 0
        self.peak_at_boundary = 0
        self.fail_at = fail_at

    async def publish(self, topics: list[str]) -> None:
        self.published.append(topics)
        self.topics.update(topics)

    async def send(self, topic: str, body: bytes, **kw: Any) -> None:
        self.outstanding += 1
        try:
            if body.endswith(b"-0") and body != b"0-0":  # first row of a later batch
                self.peak_at_boundary = max(self.peak_at_boundary, self.outstanding)
            await asyncio.sleep(0.001)
            if self.fail_at is not None and len(self.bodies) >= self.fail_at:
                raise ServerError(500, "refused")
            self.bodies.append(body)
        finally:
            self.outstanding -= 1


def batches(n: int, rows: int) -> Iterator[pa.RecordBatch]:
    for b in range(n):
        yield pa.RecordBatch.from_pydict({"body": [b"%d-%d" % (b, i) for i in range(rows)]})
    yield pa.RecordBatch.from_pydict({"body": pa.array([], pa.binary())})  # empty: skipped


async def run(feed: _Feed) -> None:
    tasks = [asyncio.create_task(feed.send_all()) for _ in range(PLAN.max_in_flight)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.wait([feed.pending])


async def test_every_row_is_sent_once_and_the_window_stays_full_between_batches() -> None:
    producer = FakeProducer()
    feed = _Feed(producer, PLAN, batches(5, 20), {})  # type: ignore[arg-type]
    await run(feed)
    expected = [b"%d-%d" % (b, i) for b in range(5) for i in range(20)]
    assert sorted(producer.bodies) == sorted(expected)
    assert len(producer.bodies) == feed.total == 100
    assert producer.published == [["t"]]
    # The first row of batches 1..4 left while sends of the batch before were still out.
    assert producer.peak_at_boundary > 1


async def test_a_failed_send_ends_the_feed_with_the_error() -> None:
    producer = FakeProducer(fail_at=30)
    feed = _Feed(producer, PLAN, batches(5, 20), {})  # type: ignore[arg-type]
    with pytest.raises(ServerError):
        await run(feed)
    assert len(producer.bodies) < 100


class RefusingProducer(FakeProducer):
    """Refuses one body the way the real producer refuses an invalid message."""

    def __init__(self, refused: bytes, error: type[InvalidMessageError]) -> None:
        super().__init__()
        self.refused = refused
        self.error = error

    async def send(self, topic: str, body: bytes, **kw: Any) -> None:
        if body == self.refused:
            raise self.error("send: message body is empty")
        await super().send(topic, body, **kw)


@pytest.mark.parametrize("error", [InvalidMessageError, MessageTooLargeError])
async def test_a_row_the_producer_refuses_is_named_by_its_index(
    error: type[InvalidMessageError],
) -> None:
    # The producer's refusal (an empty body, a ',' in an attribute, too large) failed the task
    # without saying which row, where docs/spark.md promises the row's index within the task.
    producer = RefusingProducer(b"2-5", error)
    feed = _Feed(producer, PLAN, batches(5, 20), {})  # type: ignore[arg-type]
    with pytest.raises(error, match=r"^row 45: send: message body is empty$"):
        await run(feed)
