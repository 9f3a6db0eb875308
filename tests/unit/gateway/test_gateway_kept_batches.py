"""The replica's kept batches: one per partition, bounded in bytes, taken out once."""

from __future__ import annotations

from tubemq_aio.gateway.engine.kept_batches import KeptBatches
from tubemq_aio.gateway.leases.model import KeptFence
from tubemq_aio.protocol.consumer_replies import RawMessage


def _batch(*sizes: int) -> tuple[RawMessage, ...]:
    return tuple(RawMessage(i, 0, b"x" * n, 0) for i, n in enumerate(sizes))


def test_a_kept_batch_is_taken_out_once() -> None:
    kept = KeptBatches(100)
    fence = KeptFence("t1", 56)
    assert kept.put("g", "1:t:0", fence, _batch(10, 20))
    assert (len(kept), kept.held_bytes) == (1, 30)
    got = kept.take("g", "1:t:0")
    assert got is not None
    assert (got.fence, got.size, len(got.messages)) == (fence, 30, 2)
    assert kept.take("g", "1:t:0") is None
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_the_byte_limit_holds_over_every_partition() -> None:
    kept = KeptBatches(50)
    assert kept.put("g", "1:t:0", KeptFence("a", 0), _batch(30))
    assert not kept.fits(_batch(30))
    assert not kept.put("g", "1:t:1", KeptFence("b", 0), _batch(30))  # not kept at all
    assert kept.take("g", "1:t:1") is None
    assert kept.put("g", "1:t:0", KeptFence("c", 28), _batch(45))  # replaces its own
    assert kept.held_bytes == 45
    assert not kept.put("h", "1:t:0", KeptFence("d", 0), ())  # an empty batch is never kept
    kept.clear()
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_zero_turns_read_ahead_off() -> None:
    kept = KeptBatches(0)
    assert not kept.enabled
    assert not kept.put("g", "1:t:0", KeptFence("a", 0), _batch(1))
    assert KeptBatches(1).enabled


def test_a_fence_matches_only_its_own_text_at_the_committed_offset() -> None:
    fence = KeptFence("tok", 56)
    assert fence.text() == "tok|56"
    assert fence.matches("tok|56", 56)
    assert not fence.matches("tok|56", 28)  # nacked: the batch before it comes again
    assert not fence.matches("other|56", 56)  # another read since
    assert not fence.matches("", 56)  # the fence was taken by another lease
