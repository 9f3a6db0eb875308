"""``AstrayCalls``: which calls without answer make a partition's next calls wait, and how long
(docs/reliability.md, "A request the broker runs late")."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.errors import (
    ClientClosedError,
    RequestNotSentError,
    RequestTimeoutError,
    ServerError,
)
from tubemq_aio.protocol.consumer_meta import PartitionKey

KEY = PartitionKey(1, "demo", 0)
OTHER = PartitionKey(1, "demo", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _calls() -> tuple[AstrayCalls, Clock, list[None]]:
    clock = Clock()
    counted: list[None] = []
    calls = AstrayCalls(3.0, on_late=lambda: counted.append(None), clock=clock)
    return calls, clock, counted


def test_a_call_that_may_still_arrive_rests_its_partition_rpc_timeout() -> None:
    calls, clock, counted = _calls()
    calls.note(KEY, RequestTimeoutError("no answer"), registration=False)
    assert calls.rest(KEY) == 3.0
    assert calls.rest(OTHER) == 0.0
    assert calls.rest(KEY, registrations_only=True) == 0.0  # a read: an unregister goes on
    assert len(counted) == 1  # every kind of call is counted here, reads too
    clock.now += 2.0
    assert calls.rest(KEY) == 1.0
    clock.now += 1.0
    assert calls.rest(KEY) == 0.0


def test_a_registration_rests_every_next_call_and_is_counted() -> None:
    calls, clock, counted = _calls()
    calls.note(KEY, TimeoutError(), registration=True)
    assert calls.rest(KEY) == calls.rest(KEY, registrations_only=True) == 3.0
    assert len(counted) == 1
    clock.now += 1.0
    calls.note(KEY, RequestTimeoutError("again"), registration=True)
    assert calls.rest(KEY) == 3.0  # from the later one


def test_an_answered_or_unsent_call_rests_nothing() -> None:
    calls, _clock, counted = _calls()
    calls.note(KEY, ServerError(500, "refused"), registration=True)
    calls.note(KEY, RequestNotSentError("never written"), registration=True)
    assert calls.rest(KEY) == 0.0
    assert counted == []


def test_a_cancelled_call_rests_its_partition_but_is_not_counted() -> None:
    calls, _clock, counted = _calls()
    calls.note(KEY, asyncio.CancelledError(), registration=False)
    assert calls.rest(KEY) == 3.0  # it may still be on the way
    assert counted == []  # our own cancel (a consumer closing), not a failure


def test_prune_drops_only_partitions_whose_calls_can_no_longer_run() -> None:
    calls, clock, _counted = _calls()
    calls.note(KEY, RequestTimeoutError("no answer"), registration=True)
    clock.now += 2.0
    calls.note(OTHER, RequestTimeoutError("no answer"), registration=False)
    clock.now += 1.0
    calls.prune()
    assert (calls._any, calls._registrations) == ({OTHER: 105.0}, {})
    assert calls.rest(OTHER) == 2.0


async def test_close_ends_a_settle_under_way_and_refuses_the_next_that_would_wait() -> None:
    calls, _clock, _counted = _calls()  # a fixed clock: the rest never ends by itself
    calls.note(KEY, RequestTimeoutError("no answer"), registration=True)
    settling = asyncio.ensure_future(calls.settle(KEY))
    await asyncio.sleep(0)
    assert not settling.done()
    calls.close()
    with pytest.raises(ClientClosedError, match="closed while a call of"):
        await settling
    with pytest.raises(ClientClosedError):
        await calls.settle(KEY)
    await calls.settle(OTHER)  # nothing to wait for: no error
