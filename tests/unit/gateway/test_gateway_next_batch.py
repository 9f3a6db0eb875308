"""The read of a partition's next batch after a fetch's answer, without I/O: what its answers
say (the batch to keep and where the broker cursor stands), the batch served later, the kept
batch's connection check, and the read-aheads' bounded count."""

from __future__ import annotations

import dataclasses
from zlib import crc32

import pytest

from tubemq_aio.gateway.engine.data import GatewayStats
from tubemq_aio.gateway.engine.kept_batches import KeptBatch, KeptBatches
from tubemq_aio.gateway.engine.read_ahead_driver import ReadAheads
from tubemq_aio.gateway.leases.model import KeptFence
from tubemq_aio.gateway.tubemq.batch_end import MIN_SCAN_RECORDS
from tubemq_aio.gateway.tubemq.next_batch import NextBatch, kept_read
from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage
from tubemq_aio.supervisor import Supervisor

START = 280  # where the booked batch ended


def _raw(i: int) -> RawMessage:
    body = f"m{i}".encode()
    return RawMessage(i, crc32(body) & 0x7FFFFFFF, body, 0)


BATCH = tuple(_raw(i) for i in range(3))
END = START + INDEX_MSG_UNIT_SIZE * len(BATCH)


def _get(success: bool = True, at: int = START, code: int = 200) -> GetMessageResponse:
    return GetMessageResponse(
        success, code, "", BATCH if success else (), at, 10_000, 0, None, False, False
    )


def _commit(offset: int = END, success: bool = True) -> OffsetResponse:
    return OffsetResponse(success, 200 if success else 500, "", offset, 10_000)


def test_a_read_at_the_booked_end_whose_commit_covers_it_is_kept() -> None:
    got = NextBatch(_get(), _commit(), None)
    assert got.kept_end(START) == END
    assert got.cursor(START) == END


@pytest.mark.parametrize(
    ("got", "cursor"),
    [
        (NextBatch(_get(at=START + 28), _commit(), None), -1),  # started elsewhere
        (NextBatch(_get(), _commit(START), None), -1),  # the commit came first: nothing
        (NextBatch(_get(), _commit(success=False), None), -1),  # refused
        (NextBatch(_get(), None, None), -1),  # no commit answer
        (NextBatch(None, None, None, aborted=True), -1),  # the deadline
        (NextBatch(_get(False, -1, 404), _commit(START), None), START),  # caught up
        (NextBatch(_get(False, -1, 404), _commit(success=False), None), -1),
        (NextBatch(_get(False, -1, 452), _commit(START), None), -1),  # throttled
    ],
)
def test_anything_else_keeps_nothing(got: NextBatch, cursor: int) -> None:
    assert got.kept_end(START) == -1
    assert got.cursor(START) == cursor


def test_a_kept_batch_is_served_whole_with_no_broker_call() -> None:
    far = START + INDEX_MSG_UNIT_SIZE * (MIN_SCAN_RECORDS + 1)  # a count limit may have cut it
    read = kept_read("1:t:0", START, END, far, BATCH)
    assert (read.status, read.start, read.next, read.rpcs, read.batches) == ("ok", START, END, 0, 1)
    assert read.from_kept
    assert [m.body for m in read.messages] == [b"m0", b"m1", b"m2"]
    assert read.more
    last = kept_read("1:t:0", START, END, END, BATCH)
    assert not last.more  # its records reach the max: nothing after it


@dataclasses.dataclass
class _Connection:
    is_closed: bool = False

    def abort(self) -> None:
        self.is_closed = True


def test_a_kept_batch_is_servable_while_its_connection_is_open() -> None:
    conn = _Connection()
    batch = KeptBatch(KeptFence("t", START), BATCH, 6, 10_000, END, conn)
    assert batch.servable()
    conn.abort()  # a broker restart closes it
    assert not batch.servable()
    assert KeptBatch(KeptFence("t", START), BATCH, 6).servable()  # not checked


def test_a_batch_is_discarded_only_if_it_is_still_the_one_kept() -> None:
    kept = KeptBatches(1 << 20)
    first = KeptBatch(KeptFence("a", 0), BATCH, 6)
    second = KeptBatch(KeptFence("b", 0), BATCH, 6)
    assert kept.put("g", "p", first)
    assert kept.put("g", "p", second)
    kept.discard("g", "p", first)  # replaced already: the newer one stays
    assert kept.take("g", "p") is second
    assert kept.put("g", "p", first)
    kept.discard("g", "p", first)
    assert len(kept) == 0
    assert kept.held_bytes == 0


async def test_the_read_aheads_are_bounded_and_off_without_kept_bytes() -> None:
    tasks = Supervisor("t")
    ahead = ReadAheads(KeptBatches(1 << 20), GatewayStats(), tasks, allow_ms=100, limit=2)
    assert ahead.reserve()
    assert ahead.reserve()
    assert not ahead.reserve()  # the limit
    ahead.unreserve()
    assert ahead.running == 1
    assert ahead.reserve()
    ahead.unreserve()
    ahead.unreserve()
    await tasks.close()
    assert not ahead.reserve()  # the engine is closing
    off = ReadAheads(KeptBatches(0), GatewayStats(), Supervisor("u"), allow_ms=100)
    assert not off.reserve()
    assert off.running == 0


@pytest.mark.parametrize(("allow_ms", "limit"), [(0, 1), (100, 0), (-5, 3)])
def test_read_aheads_refuse_a_zero_allowance_or_limit(allow_ms: int, limit: int) -> None:
    with pytest.raises(ValueError, match=">= 1"):
        ReadAheads(KeptBatches(0), GatewayStats(), Supervisor("v"), allow_ms=allow_ms, limit=limit)
