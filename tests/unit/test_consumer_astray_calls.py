"""``AstrayCalls``: which calls without answer make a partition's next calls wait, and how long
(docs/reliability.md, "A request the broker runs late")."""

from __future__ import annotations

from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.errors import RequestNotSentError, RequestTimeoutError, ServerError
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
    calls = AstrayCalls(3.0, on_registration=lambda: counted.append(None), clock=clock)
    return calls, clock, counted


def test_a_call_that_may_still_arrive_rests_its_partition_rpc_timeout() -> None:
    calls, clock, counted = _calls()
    calls.note(KEY, RequestTimeoutError("no answer"), registration=False)
    assert calls.rest(KEY) == 3.0
    assert calls.rest(OTHER) == 0.0
    assert calls.rest(KEY, registrations_only=True) == 0.0  # a read: an unregister goes on
    assert counted == []  # the fetch engine counts its own reads
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
