"""FakeCluster refuses arguments it cannot honour, instead of a cluster other than the one the
test asked for (a new user's attack on the testing tools): a topic string read letter by letter,
a fault rule for a node that does not exist (it never matches), a bad error code, a negative
corruption count, a broker advertised at no address, a batch of nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault

SEND = Method.BROKER_PRODUCER_SEND_MESSAGE


def test_a_topic_string_names_topics_not_letters() -> None:
    assert list(FakeCluster(topics="demo").topics) == ["demo"]
    assert list(FakeCluster(topics="a, b").topics) == ["a", "b"]


@pytest.mark.parametrize(
    "options",
    [
        {"brokers": 0},
        {"brokers": 1.5},
        {"max_batch": 0},
        {"max_batch_bytes": -1},
        {"max_batch": True},
        {"client_timeout": float("nan")},
        {"registration_timeout": 0},
        {"event_timeout": float("inf")},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_bad_cluster_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        FakeCluster(topics={"demo": 1}, **options)


def test_a_fault_rule_must_be_able_to_match() -> None:
    cluster = FakeCluster(topics={"demo": 1}, brokers=2)
    with pytest.raises(ValueError, match="node must be one of"):
        cluster.inject(SEND, Fault.error(503), node="nope")
    with pytest.raises(ValueError, match="times"):
        cluster.inject(SEND, Fault.error(503), times=0)
    with pytest.raises(ValueError, match="times"):
        cluster.inject(SEND, Fault.error(503), times=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Fault"):
        cluster.inject(SEND, "error")  # type: ignore[arg-type]
    assert cluster.inject(SEND, Fault.error(503), node="broker2").hits == 0  # a real node


def test_bad_fault_values_are_refused() -> None:
    cluster = FakeCluster(topics={"demo": 1})
    with pytest.raises(ValueError, match="int code"):
        Fault.error("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="int code"):
        Fault.error(True)
    with pytest.raises(ValueError, match="count"):
        cluster.corrupt_next_fetches(-1)
    with pytest.raises(ValueError, match="after"):
        cluster.corrupt_next_fetches(1, after=-1)
    with pytest.raises(KeyError, match="no broker 9"):
        cluster.corrupt_next_fetches(1, broker_id=9)
    for addr in ("garbage", "host:", ":80", "host:0", "host:70000", "host:x"):
        with pytest.raises(ValueError, match="host:port"):
            cluster.advertise_broker(1, addr)
    cluster.advertise_broker(1, "127.0.0.1:9")  # accepted, and undone by None
    cluster.advertise_broker(1, None)
