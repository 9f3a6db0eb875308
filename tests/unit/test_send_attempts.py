"""The producer's attempts collaborator (:class:`SendAttempts`) on its own, without an event loop
where none is needed: which errors are retried and which mean "outcome unknown", how an answer
resets the partition's back-off and a broker's 503 block, how retries are paced within the
send's deadline, and how a partition is chosen.

The transport below it is a stand-in pool (the test decides whether a connection is open and how
long a broker's reconnect backoff lasts); the session, metadata, blocker, back-off, partitioner,
encoder and parser are the real ones.
"""

from __future__ import annotations

import math
import time

import pytest

from tests.support.send_stand_ins import StandInPool, answer
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.errors import (
    ConnectError,
    ConnectionLostError,
    RemoteProtocolError,
    RequestNotSentError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    ServerError,
    ServerNotReadyError,
    ServiceNotPublishedError,
    ServiceStoppingError,
    TopicUnavailableError,
    TubeMQError,
    WriteTimeoutError,
)
from tubemq_aio.producer._attempts import NO_AVOID, SendAttempts
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.producer.config import ProducerConfig
from tubemq_aio.protocol.broker_blocking import BrokerBlocker, BrokerBlockingConfig
from tubemq_aio.protocol.message import plain_message
from tubemq_aio.protocol.producer_master_values import HeartbeatResponse, RegisterResponse
from tubemq_aio.protocol.producer_meta import Partition
from tubemq_aio.protocol.producer_send import SendResult
from tubemq_aio.protocol.retry import RetryPolicy
from tubemq_aio.protocol.routing import RoundRobinPartitioner


def attempts_for(*, retry: RetryPolicy | None = None) -> tuple[SendAttempts, StandInPool]:
    """Attempts over a session that knows topic ``t``: 3 partitions on broker 1 and 3 on 2."""
    config = ProducerConfig(masters="127.0.0.1:1", telemetry=False)  # type: ignore[arg-type]
    session = ProducerSession(config, None)  # type: ignore[arg-type]
    brokers = ("1:127.0.0.1:8123", "2:127.0.0.1:8124")
    session.metadata.apply_register(RegisterResponse(True, 200, "OK", 5, brokers), 0)
    infos = ("t#1:3:1,2:3:1#",)
    session.metadata.apply_heartbeat(HeartbeatResponse(True, 200, "OK", 5, topic_infos=infos), 0)
    pool = StandInPool()
    rpc = RpcClient(pool)  # type: ignore[arg-type]
    blocker = BrokerBlocker(BrokerBlockingConfig())
    policy = retry or RetryPolicy()
    return SendAttempts(rpc, session, blocker, RoundRobinPartitioner(), policy), pool


def partition_of(attempts: SendAttempts, broker_id: int = 1) -> Partition:
    partitions = attempts.session.metadata.writable_partitions("t")
    return next(p for p in partitions if p.broker.broker_id == broker_id)


# ---- which failures are retried ----------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        ConnectError("refused"),
        RequestNotSentError("lost before writing"),
        ServerError(503, "busy"),
        ServerNotReadyError("ServerNotReadyException", "RpcServer is not running yet"),
        ServiceNotPublishedError("java.lang.Exception", "No method 13 in service 3 found"),
    ],
    ids=["connect", "not-sent", "refused-503", "server-starting", "service-not-published"],
)
def test_a_request_that_was_certainly_not_stored_is_retried(exc: TubeMQError) -> None:
    attempts, _ = attempts_for()
    assert attempts.failed(exc, partition_of(attempts), 10.0) is exc


@pytest.mark.parametrize(
    "exc",
    [
        RequestTimeoutError("no answer"),
        ConnectionLostError("lost after writing"),
        ServiceStoppingError("ServiceStoppingException", "service is stopping..."),
    ],
    ids=["timeout", "lost", "stopping-yet-processed"],
)
def test_only_a_written_request_without_an_answer_is_outcome_unknown(exc: TubeMQError) -> None:
    attempts, _ = attempts_for()
    with pytest.raises(SendOutcomeUnknownError, match="may or may not be stored") as caught:
        attempts.failed(exc, partition_of(attempts), 10.0)
    assert caught.value.__cause__ is exc


@pytest.mark.parametrize(
    "exc",
    [WriteTimeoutError("never written"), ServerError(400, "bad"), RemoteProtocolError("junk")],
    ids=["write-timeout", "final-refusal", "garbled"],
)
def test_other_failures_are_raised_as_they_are(exc: TubeMQError) -> None:
    """A write timeout was never written (not outcome-unknown) but the deadline has passed."""
    attempts, _ = attempts_for()
    with pytest.raises(type(exc)) as caught:
        attempts.failed(exc, partition_of(attempts), 10.0)
    assert caught.value is exc


def test_a_connect_failure_counts_against_the_link_not_the_partition() -> None:
    attempts, _ = attempts_for()
    partition = partition_of(attempts)
    for _ in range(5):
        attempts.failed(ConnectError("refused"), partition, 10.0)
    assert attempts.blocker.snapshot().connect_failures == {"127.0.0.1:8123": 5}
    assert attempts.backoff.delayed(10.0) == frozenset()


# ---- what an answer resets ---------------------------------------------------------------------


def test_failures_back_a_partition_off_and_an_answer_ends_it() -> None:
    attempts, _ = attempts_for()
    partition = partition_of(attempts)
    for _ in range(4):  # the fourth failure in a row exceeds the Java limit of 3
        attempts.failed(RequestNotSentError("lost"), partition, 10.0)
    assert partition.partition_key in attempts.backoff.delayed(10.0)
    result = attempts.answered(answer(), partition)
    assert isinstance(result, SendResult)
    assert (result.message_id, result.partition_key) == (7, partition.partition_key)
    assert attempts.backoff.delayed(10.0) == frozenset()


def test_a_503_blocks_the_broker_and_the_next_success_lifts_it() -> None:
    attempts, _ = attempts_for()
    partition = partition_of(attempts, broker_id=2)
    refusal = attempts.answered(answer(503), partition)
    assert isinstance(refusal, ServerError)
    assert refusal.err_code == 503
    assert 2 in attempts.blocker.blocked(time.monotonic())  # the blocker's clock
    assert isinstance(attempts.answered(answer(), partition), SendResult)
    assert 2 not in attempts.blocker.blocked(time.monotonic())


def test_a_final_refusal_is_raised_and_still_ends_the_back_off() -> None:
    """Any answer (success or business error) clears the partition's failures
    (docs/protocol/wire.md §5.9)."""
    attempts, _ = attempts_for()
    partition = partition_of(attempts)
    for _ in range(4):
        attempts.failed(RequestNotSentError("lost"), partition, 10.0)
    with pytest.raises(ServerError) as caught:
        attempts.answered(answer(400), partition)
    assert caught.value.err_code == 400
    assert attempts.backoff.delayed(10.0) == frozenset()


# ---- retries bounded by the deadline -----------------------------------------------------------


def test_retries_are_immediate_first_then_paced_and_end_at_the_deadline() -> None:
    policy = RetryPolicy(immediate=2, initial=0.5, maximum=4.0, jitter=0.0)
    attempts, _ = attempts_for(retry=policy)
    last = RequestNotSentError("lost")
    assert attempts.retry_pause(last, "t", 1, 100.0, 110.0) == 0.0
    assert attempts.retry_pause(last, "t", 2, 100.0, 110.0) == 0.0
    pauses = [attempts.retry_pause(last, "t", n, 100.0, 110.0) or 0.0 for n in range(3, 9)]
    assert pauses[0] == pytest.approx(0.5)
    assert pauses == sorted(pauses)  # growing ...
    assert max(pauses) == pytest.approx(4.0)  # ... up to the maximum
    # Never past the deadline, and no attempt once it has passed, however few were made.
    assert attempts.retry_pause(last, "t", 8, 109.75, 110.0) == pytest.approx(0.25)
    assert attempts.retry_pause(last, "t", 1, 110.0, 110.0) is None
    assert attempts.retry_pause(last, "t", 1, 111.0, 110.0) is None
    assert attempts.retry_pause(last, "t", 1, math.nan, 110.0) is None


def test_a_connect_failure_waits_for_the_earliest_reconnect_but_not_past_the_deadline() -> None:
    attempts, pool = attempts_for(retry=RetryPolicy(immediate=2, jitter=0.0))
    pool.retry_after = 1.5  # every broker of the topic is in reconnect backoff
    assert attempts.retry_pause(ConnectError("refused"), "t", 1, 100.0, 110.0) == 1.5
    assert attempts.retry_pause(ConnectError("refused"), "t", 1, 100.0, 100.5) == 0.5
    # Other failures do not wait for a reconnect: another connection is open.
    assert attempts.retry_pause(RequestNotSentError("lost"), "t", 1, 100.0, 110.0) == 0.0
    pool.retry_after = 0.0
    assert attempts.retry_pause(ConnectError("refused"), "t", 1, 100.0, 110.0) == 0.0


# ---- choosing the partition --------------------------------------------------------------------


def test_begin_avoids_the_partitions_tried_and_backed_off_while_others_are_left() -> None:
    attempts, _ = attempts_for()
    partitions = attempts.session.metadata.writable_partitions("t")
    keys = [p.partition_key for p in partitions]
    message = plain_message(b"x")
    for _ in range(4):  # one partition backs off ...
        attempts.failed(RequestNotSentError("lost"), partitions[0], 10.0)
    tried = set(keys[1:-1])  # ... the send tried all others but the last
    for _ in range(6):
        partition, started = attempts.begin("t", None, tried, 10.0, message, 5000, 5.0)
        assert partition.partition_key == keys[-1]
        assert isinstance(started, bytes)  # no open connection: the caller sends the payload
    # Every partition avoided: one is chosen anyway (the send goes on, never stalls).
    partition, _ = attempts.begin("t", None, set(keys), 10.0, message, 5000, 5.0)
    assert partition.partition_key in keys


def test_begin_skips_blocked_brokers_while_others_are_left() -> None:
    attempts, _ = attempts_for()
    attempts.answered(answer(503), partition_of(attempts, broker_id=2))
    for _ in range(12):
        partition, _ = attempts.begin(
            "t", None, NO_AVOID, time.monotonic(), plain_message(b"x"), 5000, 5.0
        )
        assert partition.broker.broker_id == 1


def test_begin_refuses_a_topic_without_a_writable_partition() -> None:
    attempts, _ = attempts_for()
    with pytest.raises(TopicUnavailableError, match="no writable partition"):
        attempts.begin("unknown", None, NO_AVOID, 10.0, plain_message(b"x"), 5000, 5.0)
