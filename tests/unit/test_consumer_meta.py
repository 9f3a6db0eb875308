"""Consumer metadata strings (docs/protocol/consumer.md §0.2) and argument validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.errors import (
    ConfigError,
    ConsumerConfigError,
    MalformedMetaError,
    RemoteProtocolError,
)
from tubemq_aio.protocol.client_id import (
    MAX_CLIENT_ID_LENGTH,
    MAX_CONSUMER_GROUP_LENGTH,
    MAX_VERSION_LENGTH,
    make_client_id,
)
from tubemq_aio.protocol.consumer_meta import (
    BoundSession,
    BrokerInfo,
    ConsumePosition,
    FailureInfo,
    Partition,
    PartitionKey,
    ReadStatus,
    SubscribeInfo,
    TopicCondition,
    format_required_partitions,
    lag_in_messages,
    parse_required_partitions,
    validate_bound_offsets,
)
from tubemq_aio.protocol.consumer_names import (
    planner_group,
    validate_filters,
    validate_group_name,
    validate_subscriptions,
    validate_topic_name,
)

# Names without any separator character of the wire formats.
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_-.", min_size=1)
hosts = st.from_regex(r"[a-z0-9.\-]{1,20}", fullmatch=True)
ints = st.integers(min_value=0, max_value=2**31 - 1)
brokers = st.builds(BrokerInfo, ints, hosts, st.integers(1, 65535))
partitions = st.builds(Partition, brokers, names, ints)


def test_golden_strings_from_the_note() -> None:
    broker = BrokerInfo(1, "10.0.0.1", 8123)
    part = Partition(broker, "demo", 10002)
    assert part.format() == "1:10.0.0.1:8123#demo:10002"
    assert part.key.format() == "1:demo:10002"
    assert part.key.store_index == 1
    info = SubscribeInfo("c1_127.0.0.1-1-2-3-Pull-1.0", "g1", part)
    # The proto comment shows '-' separators; the code uses '#' (§0.2).
    assert info.format() == "c1_127.0.0.1-1-2-3-Pull-1.0@g1#1:10.0.0.1:8123#demo:10002"
    assert SubscribeInfo.parse(info.format()) == info
    assert TopicCondition("demo", frozenset({"b", "a"})).format() == "demo#a,b"
    failure = FailureInfo.parse("411:1:10.0.0.1:8123#demo:3")
    assert failure == FailureInfo(411, Partition(broker, "demo", 3))


@given(partitions)
def test_partition_round_trip(part: Partition) -> None:
    assert Partition.parse(part.format()) == part
    assert PartitionKey.parse(part.key.format()) == part.key


@given(names, names, partitions)
def test_subscribe_info_round_trip(consumer: str, group: str, part: Partition) -> None:
    info = SubscribeInfo(consumer, group, part)
    assert SubscribeInfo.parse(info.format()) == info


@given(st.integers(100, 599), partitions)
def test_failure_info_round_trip(code: int, part: Partition) -> None:
    assert FailureInfo.parse(FailureInfo(code, part).format()) == FailureInfo(code, part)


@given(names, st.frozensets(names, min_size=1))
def test_topic_condition_round_trip(topic: str, filters: frozenset[str]) -> None:
    cond = TopicCondition(topic, filters)
    assert TopicCondition.parse(cond.format()) == cond


@given(st.dictionaries(st.builds(PartitionKey, ints, names, ints), ints))
def test_required_partitions_round_trip(offsets: dict[PartitionKey, int]) -> None:
    assert parse_required_partitions(format_required_partitions(offsets)) == offsets


def test_required_partition_golden() -> None:
    text = format_required_partitions({PartitionKey(2, "t", 1): 56, PartitionKey(1, "t", 0): 0})
    assert text == "1:t:0=0,2:t:1=56"


def test_broker_blank_port_means_default() -> None:
    assert BrokerInfo.parse("5:10.1.1.1: ") == BrokerInfo(5, "10.1.1.1", 8123)
    assert BrokerInfo.parse("5:10.1.1.1: ", default_port=8124).port == 8124


@pytest.mark.parametrize(
    "text",
    ["", "1:host", "x:host:1", "1:host:1#topic", "1:host:1#topic:x", "1:host:1#:3", "a:t:1:2"],
)
def test_malformed_partition_strings(text: str) -> None:
    with pytest.raises(MalformedMetaError) as info:
        Partition.parse(text)
    assert isinstance(info.value, RemoteProtocolError)


@pytest.mark.parametrize("text", ["nogroup#1:h:1#t:1", "c@g", "c@#1:h:1#t:1", "@g#1:h:1#t:1"])
def test_malformed_subscribe_info(text: str) -> None:
    with pytest.raises(MalformedMetaError):
        SubscribeInfo.parse(text)


@pytest.mark.parametrize("text", ["t", "t#", "#a", "t#a,,b"])
def test_malformed_topic_condition(text: str) -> None:
    with pytest.raises(MalformedMetaError):
        TopicCondition.parse(text)


def test_read_status_per_consume_position() -> None:
    # §9.3: first registration only; every re-registration sends 0.
    assert ConsumePosition.FROM_FIRST_OFFSET.read_status(True) == ReadStatus.NORMAL
    assert ConsumePosition.FROM_LATEST_OFFSET.read_status(True) == ReadStatus.FROM_MAX
    assert ConsumePosition.FROM_MAX_OFFSET_ALWAYS.read_status(True) == 2
    for position in ConsumePosition:
        assert position.read_status(False) == 0


def test_lag_in_messages() -> None:
    assert lag_in_messages(0, 28 * 10) == 10
    assert lag_in_messages(28, 28 * 10 + 27) == 9
    assert lag_in_messages(-2, 100) == 0
    assert lag_in_messages(100, 50) == 0


def test_group_name_rules() -> None:
    assert validate_group_name("g-1_a") == "g-1_a"
    for bad in ["", "g", "1group", "g#1", "grüppe", "g" * 1025]:
        with pytest.raises(ConsumerConfigError):
            validate_group_name(bad)


def test_the_longest_group_makes_an_id_the_master_takes_and_a_longer_one_is_refused() -> None:
    """A group of 928–1024 characters passed the name rule but made a consumer id over the
    master's 1024, refused at start as 'client id longer than 1024 chars'; the id with the
    longest host, pid, clock, random int, kind and version still fits at 927."""
    longest = "g" * MAX_CONSUMER_GROUP_LENGTH
    client_id = make_client_id(
        "255.255.255.255",
        2**22,
        2**64 - 1,
        2**31 - 1,
        "v" * MAX_VERSION_LENGTH,
        group=validate_group_name(longest),
        kind="Balance",
    )
    assert len(client_id) == MAX_CLIENT_ID_LENGTH
    with pytest.raises(
        ConsumerConfigError, match="group name of 928 characters is too long"
    ) as info:
        validate_group_name(longest + "g")
    assert "g" * 100 not in str(info.value)  # the length, not the name
    assert planner_group("g" * 919) == "g" * 919 + "_planner"
    with pytest.raises(ConsumerConfigError, match=r"920 characters .* at most 919"):
        planner_group("g" * 920)


def test_topic_name_rules() -> None:
    assert validate_topic_name("  demo  ") == "demo"
    for bad in ["", "   ", "t" * 65, "a#b", "a:b", "a,b", "a b"]:
        with pytest.raises(ConsumerConfigError) as info:
            validate_topic_name(bad)
        assert isinstance(info.value, ConfigError)
        assert isinstance(info.value, ValueError)


def test_filter_limits() -> None:
    assert validate_filters(None) == frozenset()
    assert validate_filters([" a ", "b"]) == frozenset({"a", "b"})
    assert len(validate_filters([f"f{i}" for i in range(500)])) == 500
    with pytest.raises(ConsumerConfigError):
        validate_filters([f"f{i}" for i in range(501)])
    with pytest.raises(ConsumerConfigError):
        validate_filters(["x" * 257])
    assert validate_filters(["x" * 256])
    for bad in ["", "  ", "a,b", "a#b"]:
        with pytest.raises(ConsumerConfigError):
            validate_filters([bad])


def test_subscriptions() -> None:
    assert validate_subscriptions({" t1 ": ["a"], "t2": None}) == {
        "t1": frozenset({"a"}),
        "t2": frozenset(),
    }
    with pytest.raises(ConsumerConfigError):
        validate_subscriptions({})
    with pytest.raises(ConsumerConfigError):
        validate_subscriptions({"t": None, " t": None})


def test_bound_offsets() -> None:
    assert validate_bound_offsets({"1:t:0": 0}, ["t"]) == {PartitionKey(1, "t", 0): 0}
    keyed = {PartitionKey(2, "t", 3): 28}
    assert validate_bound_offsets(keyed, ["t"]) == keyed
    for bad in ({"1:t:0": -1}, {"1:u:0": 0}, {"1:t": 0}, {"x:t:0": 0}):
        with pytest.raises(ConsumerConfigError):
            validate_bound_offsets(bad, ["t"])


def test_bound_session_validation() -> None:
    assert BoundSession("sk", 2).select_big
    for key, count in (("", 2), ("  ", 2), ("sk", 0)):
        with pytest.raises(ConsumerConfigError):
            BoundSession(key, count)
