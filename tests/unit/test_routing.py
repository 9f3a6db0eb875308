"""Partition routing (docs/protocol/wire.md §5.9): round robin per topic, stable key hashing,
back-off."""

from __future__ import annotations

import random
import zlib
from collections import Counter

import pytest

from tubemq_aio.errors import NoPartitionError
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.routing import (
    DefaultPartitioner,
    KeyHashPartitioner,
    PartitionBackoff,
    Partitioner,
    RoundRobinPartitioner,
    key_hash,
)


def partitions(n: int, topic: str = "t") -> list[Partition]:
    return [Partition(Broker(i % 3, f"h{i % 3}", 8123), topic, i) for i in range(n)]


def test_round_robin_even_and_in_order() -> None:
    parts = partitions(7)
    rr = RoundRobinPartitioner(random.Random(1))
    picks = [rr.select("t", parts) for _ in range(70)]
    counts = Counter(p.partition_key for p in picks)
    assert set(counts.values()) == {10}
    start = parts.index(picks[0])
    assert picks[:7] == [parts[(start + i) % 7] for i in range(7)]


def test_round_robin_counter_is_per_topic() -> None:
    rr = RoundRobinPartitioner(random.Random(2))
    a, b = partitions(4, "a"), partitions(4, "b")
    first_a = rr.select("a", a)
    for _ in range(3):
        rr.select("b", b)
    assert rr.select("a", a) == a[(a.index(first_a) + 1) % 4]


def test_round_robin_matches_java_formula() -> None:
    rng = random.Random(3)
    start = random.Random(3).getrandbits(32)
    rr = RoundRobinPartitioner(rng)
    parts = partitions(5)
    for i in range(1, 20):
        expected = (((start + i) & 0xFFFFFFFF) & 0x7FFFFFFF) % 5
        assert rr.select("t", parts) is parts[expected]


def test_round_robin_skips_avoided() -> None:
    parts = partitions(4)
    rr = RoundRobinPartitioner(random.Random(4))
    avoid = {parts[0].partition_key, parts[2].partition_key}
    picks = {rr.select("t", parts, avoid=avoid).partition_key for _ in range(20)}
    assert picks == {parts[1].partition_key, parts[3].partition_key}


def test_round_robin_all_avoided_still_picks() -> None:
    parts = partitions(3)
    rr = RoundRobinPartitioner(random.Random(5))
    avoid = {p.partition_key for p in parts}
    picks = Counter(rr.select("t", parts, avoid=avoid).partition_key for _ in range(30))
    assert set(picks.values()) == {10}


def test_empty_partitions() -> None:
    for p in (RoundRobinPartitioner(), KeyHashPartitioner()):
        with pytest.raises(NoPartitionError):
            p.select("t", [], b"k")
    assert issubclass(NoPartitionError, ValueError)


def test_key_hash_is_crc32_and_stable() -> None:
    assert key_hash(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF == 907060870
    assert key_hash("héllo") == key_hash("héllo".encode())


def test_key_routing_stable_and_spread() -> None:
    parts = partitions(8)
    router = DefaultPartitioner()
    for i in range(50):
        key = f"user-{i}".encode()
        first = router.select("t", parts, key)
        assert all(router.select("t", parts, key) is first for _ in range(3))
        assert first is parts[key_hash(key) % 8]
    counts = Counter(router.select("t", parts, f"k{i}").partition_key for i in range(8000))
    assert len(counts) == 8
    assert min(counts.values()) > 800  # expected 1000 each


def test_key_routing_ignores_avoid_and_falls_back_without_key() -> None:
    parts = partitions(4)
    router = KeyHashPartitioner(RoundRobinPartitioner(random.Random(6)))
    target = parts[key_hash(b"k") % 4]
    assert router.select("t", parts, b"k", avoid={target.partition_key}) is target
    picks = Counter(router.select("t", parts).partition_key for _ in range(40))
    assert set(picks.values()) == {10}


def test_custom_partitioner_protocol() -> None:
    class First:
        def select(self, topic, partitions, key=None, *, avoid=frozenset()):  # type: ignore[no-untyped-def]
            return partitions[0]

    assert isinstance(First(), Partitioner)
    assert isinstance(DefaultPartitioner(), Partitioner)
    assert isinstance(RoundRobinPartitioner(), Partitioner)


def test_backoff_after_more_than_three_failures() -> None:
    backoff = PartitionBackoff()
    for _ in range(3):
        backoff.record_failure("p", now=0.0)
    assert backoff.delayed(0.0) == frozenset()
    backoff.record_failure("p", now=1.0)
    assert backoff.delayed(1.0) == {"p"}
    assert backoff.delayed(3.9) == {"p"}
    assert backoff.delayed(4.0) == frozenset()


def test_backoff_cleared_by_response() -> None:
    backoff = PartitionBackoff(max_failures=0, delay=5.0)
    backoff.record_failure("p", 0.0)
    assert backoff.delayed(1.0) == {"p"}
    backoff.record_response("p")
    assert backoff.delayed(1.0) == frozenset()
    assert "delayed=0" in repr(backoff)
