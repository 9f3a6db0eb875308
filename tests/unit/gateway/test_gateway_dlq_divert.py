"""Poison-batch diversion with stand-ins: what is diverted, and a failed or cancelled
dead-letter produce gives the lease back instead of losing or stranding the batch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tubemq_aio.gateway.config.tables import GroupConfig, GroupSpec
from tubemq_aio.gateway.engine.data import FetchOutcome, Lease, Position
from tubemq_aio.gateway.engine.dead_letters import (
    MAX_DIVERTS,
    DivertProgress,
    fetch_diverting,
    is_poison,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.models import Message

GROUP = GroupConfig(spec=GroupSpec(name="g1", topics=("t",)), max_redeliveries=2, dlq_topic="dead")


def outcome(redelivery: int) -> FetchOutcome:
    lease = Lease(LeaseKey("g1", "c", "1:t:0", "L"), 0, redelivery)
    msgs = (Message(topic="t", body=b"x", attributes={"a": "1"}, partition_key="1:t:0"),)
    return FetchOutcome("ok", lease, msgs, None, Position(56, 84, 84, 28, 0))


class Engine:
    def __init__(self) -> None:
        self.settled: list[str] = []

    async def settle(self, ref: Any, action: str, *, delay_ms: int = 0) -> str:
        self.settled.append(action)
        return "acked" if action == "ack" else "released"


class Producer:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []
        self.fail = fail

    async def send(self, topic: str, body: bytes, **kw: Any) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((topic, body, dict(kw["attributes"])))


def fetches(*items: FetchOutcome) -> Callable[[], Awaitable[FetchOutcome]]:
    queue = list(items)

    async def fetch() -> FetchOutcome:
        return queue.pop(0)

    return fetch


def run(producer: Any, engine: Engine, *items: FetchOutcome) -> tuple[Any, list[int]]:
    counted: list[int] = []
    got = asyncio.run(
        fetch_diverting(GROUP, engine, producer, fetches(*items), counted.append, 1.0)  # type: ignore[arg-type]
    )
    return got, counted


def test_is_poison_only_past_max_redeliveries() -> None:
    assert not is_poison(GROUP, outcome(2))
    assert is_poison(GROUP, outcome(3))
    off = GroupConfig(spec=GroupSpec(name="g1", topics=("t",)))
    assert not is_poison(off, outcome(99))
    assert not is_poison(GROUP, FetchOutcome("empty", None, ()))


def test_a_poison_batch_is_produced_acked_and_the_next_one_returned() -> None:
    engine, producer = Engine(), Producer()
    got, counted = run(producer, engine, outcome(3), outcome(0))
    assert got.lease.redelivery == 0
    assert producer.sent == [
        ("dead", b"x", {"a": "1", "tgw_src": "1:t:0@56", "tgw_reason": "max_redeliveries"})
    ]
    assert engine.settled == ["ack"]
    assert counted == [1]


def test_without_a_producer_nothing_is_diverted() -> None:
    engine = Engine()
    got, counted = run(None, engine, outcome(5))
    assert got.lease.redelivery == 5
    assert engine.settled == []
    assert counted == []


def test_a_failed_produce_releases_the_lease_and_answers_empty() -> None:
    engine, producer = Engine(), Producer(fail=OSError("broker away"))
    got, counted = run(producer, engine, outcome(3))
    assert got.status == "empty"
    assert engine.settled == ["release"]
    assert counted == []


def test_a_cancelled_produce_releases_the_lease() -> None:
    engine, producer = Engine(), Producer(fail=asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        run(producer, engine, outcome(3))
    assert engine.settled == ["release"]


def test_at_most_max_diverts_per_fetch() -> None:
    engine, producer = Engine(), Producer()
    got, counted = run(producer, engine, *[outcome(3) for _ in range(MAX_DIVERTS)])
    assert got.status == "empty"
    assert counted == [1] * MAX_DIVERTS


def test_a_produce_failing_part_way_never_copies_a_message_again() -> None:
    lease = Lease(LeaseKey("g1", "c", "1:t:0", "L"), 0, 3)
    msgs = tuple(Message(topic="t", body=f"m{i}".encode(), partition_key="1:t:0") for i in range(3))
    poison = FetchOutcome("ok", lease, msgs, None, Position(56, 140, 140, 84, 0))
    failures = 5

    class FlakyProducer(Producer):
        async def send(self, topic: str, body: bytes, **kw: Any) -> None:
            nonlocal failures
            if body == b"m1" and failures:
                failures -= 1
                raise ConnectionError("broker went away")
            await super().send(topic, body, **kw)

    engine, producer, progress = Engine(), FlakyProducer(), DivertProgress()
    stand_ins: tuple[Any, Any] = (engine, producer)
    for _ in range(6):  # five attempts fail at the second message, the sixth gets through
        asyncio.run(
            fetch_diverting(
                GROUP, *stand_ins, fetches(poison, outcome(0)), lambda _n: None, 1.0, progress
            )
        )
    assert [body for _, body, _ in producer.sent] == [b"m0", b"m1", b"m2"]
    assert engine.settled == ["release"] * 5 + ["ack"]
    assert progress.sent("1:t:0@56") == 0  # forgotten once diverted whole
