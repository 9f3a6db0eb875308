"""FakeCluster refuses arguments it cannot honour, instead of a cluster other than the one the
test asked for (a new user's attack on the testing tools): a topic string read letter by letter,
a fault rule for a node that does not exist (it never matches), a bad error code, a negative
corruption count, a broker advertised at no address, a batch of nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tubemq_aio import Producer, ServerError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, TopicLayout

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


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topics": {"demo": 2.5}}, "partitions"),  # took it, and served a float partition count
        ({"topics": {"demo": True}}, "partitions"),
        ({"topics": {"demo": "3"}}, "partitions"),  # a raw TypeError from a comparison
        ({"topics": {"demo": 10001}}, "partitions"),  # ids of two stores overlap past 10000
        ({"topics": {"": 1}}, "name"),
        ({"topics": {1: 1}}, "name"),
        ({"topics": 5}, "topics"),  # a raw "'int' object is not iterable"
        ({"client_timeout": "5"}, "client_timeout"),  # a raw TypeError from a comparison
        ({"client_timeout": True}, "client_timeout"),
        ({"balance_period": "1"}, "balance_period"),
    ],
    ids=repr,
)
def test_bad_topics_and_timeouts_are_refused_by_name(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        FakeCluster(**options)


def test_a_topic_layout_added_later_is_checked_too() -> None:
    cluster = FakeCluster(topics={"demo": 1})
    with pytest.raises(ValueError, match="stores"):
        cluster.add_topic(TopicLayout("t", 1, stores=0))
    with pytest.raises(ValueError, match="partitions"):
        cluster.add_topic("t", 0)
    with pytest.raises(ValueError, match="TopicLayout"):
        cluster.add_topic(5)  # type: ignore[arg-type]
    cluster.add_topic(TopicLayout("t", 10000, stores=2))  # the largest a store holds
    assert sorted(cluster.topics) == ["demo", "t"]


@pytest.mark.parametrize(
    ("method", "node"),
    [
        (999_999, None),  # no such method
        (Method.MASTER_BROKER_REGISTER, None),  # a method no node of the fake serves
        (SEND, "master"),  # the master never receives a send
        (Method.MASTER_PRODUCER_REGISTER, "broker1"),  # brokers never receive a register
        (True, None),
    ],
    ids=repr,
)
def test_a_fault_rule_for_a_method_its_node_never_receives_is_refused(
    method: int, node: str | None
) -> None:
    # Each was taken, and its rule never matched: the test ran without the fault it asked for.
    cluster = FakeCluster(topics={"demo": 1})
    with pytest.raises(ValueError, match="serves no method"):
        cluster.inject(method, Fault.error(503), node=node)
    assert cluster.plan.rules == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: Fault.error(2**31),  # failed the node's answer at request time: a reset
        lambda: Fault.error(-(2**31) - 1),
        lambda: Fault.exception(123),  # type: ignore[arg-type]  # the same, at request time
        lambda: Fault.exception(""),
        lambda: Fault.exception("java.lang.Exception", 5),  # type: ignore[arg-type]
        lambda: Fault.exception("java.lang.Exception", fatal="yes"),  # type: ignore[arg-type]
        lambda: Fault.delay("1"),  # type: ignore[arg-type]  # a raw TypeError
        lambda: Fault.delay(True),
        lambda: Fault.delay(float("inf")),  # an answer that never comes is no_answer()
        lambda: Fault.late("1"),  # type: ignore[arg-type]
        lambda: Fault.late(True),
    ],
)
def test_a_fault_that_cannot_be_answered_is_refused_when_made(make: Any) -> None:
    with pytest.raises(ValueError, match=r"fault|delay|late"):
        make()


async def test_the_widest_error_code_is_answered() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(SEND, Fault.error(2**31 - 1, "widest"))
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            with pytest.raises(ServerError, match="widest"):
                await producer.send("demo", b"x")


@pytest.mark.parametrize("port", [True, 1.5, -1, 70000, "8715"], ids=repr)
async def test_a_bad_master_port_is_refused_before_any_node_listens(port: Any) -> None:
    # True and 1.5 bound port 1; the others failed with a raw OverflowError or gaierror.
    cluster = FakeCluster(topics={"demo": 1})
    with pytest.raises(ValueError, match="master_port"):
        await cluster.start(master_port=port)
    assert not any(node.running for node in cluster._nodes())
