"""The replica's kept batches: one per partition, bounded in bytes, taken out once."""

from __future__ import annotations

import random

import pytest

from tubemq_aio.gateway.config.limits import MAX_KEPT_BATCH_BYTES
from tubemq_aio.gateway.engine.kept_batches import KeptBatch, KeptBatches
from tubemq_aio.gateway.leases.model import KeptFence
from tubemq_aio.protocol.consumer_replies import RawMessage, payload_bytes


def _batch(*sizes: int, fence: KeptFence | None = None, max_offset: int = -1) -> KeptBatch:
    messages = tuple(RawMessage(i, 0, b"x" * n, 0) for i, n in enumerate(sizes))
    return KeptBatch(fence or KeptFence("f", 0), messages, payload_bytes(messages), max_offset)


def test_a_kept_batch_is_taken_out_once() -> None:
    kept = KeptBatches(100)
    fence = KeptFence("t1", 56)
    assert kept.put("g", "1:t:0", _batch(10, 20, fence=fence, max_offset=99))
    assert (len(kept), kept.held_bytes) == (1, 30)
    got = kept.take("g", "1:t:0")
    assert got is not None
    assert (got.fence, got.size, len(got.messages), got.max_offset) == (fence, 30, 2, 99)
    assert kept.take("g", "1:t:0") is None
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_the_byte_limit_holds_over_every_partition() -> None:
    kept = KeptBatches(50)
    assert kept.put("g", "1:t:0", _batch(30))
    assert not kept.fits(30)
    assert kept.fits(20)
    assert not kept.put("g", "1:t:1", _batch(30))  # not kept at all
    assert kept.take("g", "1:t:1") is None
    assert kept.put("g", "1:t:0", _batch(45))  # replaces its own
    assert kept.held_bytes == 45
    assert not kept.put("h", "1:t:0", _batch())  # an empty batch is never kept
    kept.clear()
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_the_size_carried_is_the_size_counted() -> None:
    """put keeps the size the batch carries (summed once by its builder), no second sum."""
    messages = (RawMessage(0, 0, b"x" * 10, 0),)
    kept = KeptBatches(100)
    assert kept.put("g", "1:t:0", KeptBatch(KeptFence("f", 0), messages, 70))
    assert kept.held_bytes == 70
    assert not kept.fits(31)


def test_bytes_kept_never_pass_the_limit_and_come_back_to_zero() -> None:
    """Random puts and takes over several partitions: the bytes held are those of the batches
    kept (a model says which), never more than the limit, and 0 once every one is taken."""
    rng = random.Random(7)
    limit = 1000
    kept = KeptBatches(limit)
    partitions = [("g", f"1:t:{i}") for i in range(8)] + [("h", "1:t:0")]
    model: dict[tuple[str, str], int] = {}
    for _ in range(3000):
        group, key = rng.choice(partitions)
        if rng.random() < 0.6:
            batch = _batch(*(rng.randrange(0, 300) for _ in range(rng.randrange(0, 4))))
            model.pop((group, key), None)  # put replaces the partition's own batch first
            room = sum(model.values()) + batch.size <= limit and bool(batch.messages)
            assert kept.put(group, key, batch) == room
            if room:
                model[group, key] = batch.size
        else:
            got = kept.take(group, key)
            assert (None if got is None else got.size) == model.pop((group, key), None)
        assert kept.held_bytes == sum(model.values()) <= limit
        assert len(kept) == len(model)
    for group, key in partitions:
        kept.take(group, key)
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_zero_turns_read_ahead_off() -> None:
    kept = KeptBatches(0)
    assert not kept.enabled
    assert not kept.put("g", "1:t:0", _batch(1))
    assert KeptBatches(1).enabled
    assert KeptBatches(MAX_KEPT_BATCH_BYTES).limit_bytes == MAX_KEPT_BATCH_BYTES


@pytest.mark.parametrize("bad", [True, 1.5, float("nan"), float("inf"), "100", None])
def test_a_limit_of_the_wrong_type_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="limit_bytes must be an int"):
        KeptBatches(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, MAX_KEPT_BATCH_BYTES + 1, 2**200])
def test_a_limit_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match=r"limit_bytes must be in \[0, "):
        KeptBatches(bad)


def test_put_refuses_what_is_not_a_kept_batch() -> None:
    kept = KeptBatches(100)
    messages = (RawMessage(0, 0, b"x", 0),)
    with pytest.raises(TypeError, match="KeptBatch"):
        kept.put("g", "1:t:0", messages)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        kept.put("g", "1:t:0", KeptBatch(KeptFence("f", 0), messages, -1))
    assert (len(kept), kept.held_bytes) == (0, 0)


def test_a_fence_matches_only_its_own_text_at_the_committed_offset() -> None:
    fence = KeptFence("tok", 56)
    assert fence.text() == "tok|56"
    assert fence.matches("tok|56", 56)
    assert not fence.matches("tok|56", 28)  # nacked: the batch before it comes again
    assert not fence.matches("other|56", 56)  # another read since
    assert not fence.matches("", 56)  # the fence was taken by another lease
