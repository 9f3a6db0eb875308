"""Client-balanced (V2) consumer helpers (docs/protocol/consumer.md §8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.errors import ClientBalanceConfigError, ConsumerConfigError, MalformedMetaError
from tubemq_aio.protocol.client_balance import (
    BalanceClient,
    OpsTaskIds,
    PartitionMetaCache,
    SubscriptionReport,
    SubscriptionReporter,
    assign_modulo,
    build_get_part_meta,
    build_heartbeat_v2,
    build_register_v2,
    format_part_sub_info,
    java_string_hash,
    parse_broker_config_list,
    parse_part_sub_info,
    parse_topic_meta_list,
    validate_bootstrap_offset,
    validate_node,
)
from tubemq_aio.protocol.consumer_meta import BrokerInfo, PartitionKey
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb

keys = st.builds(
    PartitionKey,
    st.integers(0, 10**6),
    st.text(alphabet="abcxyz_0123", min_size=1, max_size=10),
    st.integers(0, 10**5),
)


def test_java_string_hash_matches_java() -> None:
    # Values printed by a real JVM: ((long) s.hashCode()) & 0xffffffffL.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("1:demo:0") == 2393512898
    assert java_string_hash("1:demo:10001") == 2968981060
    text = "1:demo:0"  # s[0]*31^(n-1) + ... + s[n-1], modulo 2^32
    assert (
        java_string_hash(text)
        == sum(ord(c) * 31 ** (len(text) - 1 - i) for i, c in enumerate(text)) % 2**32
    )
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE
    assert java_string_hash("é") == 0xE9  # one UTF-16 code unit
    assert java_string_hash("😀") == (0xD83D * 31 + 0xDE00)  # surrogate pair


def test_assign_modulo_golden() -> None:
    metas = [PartitionKey(1, "demo", i) for i in range(4)]
    node0 = assign_modulo(metas, 2, 0)
    node1 = assign_modulo(metas, 2, 1)
    assert node0 | node1 == set(metas)
    assert not node0 & node1
    expected0 = {k for k in metas if java_string_hash(k.format()) % 2 == 0}
    assert node0 == expected0


@given(st.sets(keys, max_size=40), st.integers(1, 7))
def test_assign_modulo_partitions_the_keys(metas: set[PartitionKey], count: int) -> None:
    parts = [assign_modulo(metas, count, n) for n in range(count)]
    assert set().union(*parts) == metas
    assert sum(len(p) for p in parts) == len(metas)


def test_node_validation() -> None:
    assert validate_node(3, 2) == (3, 2)
    assert validate_node(0, 7) == (-2, -2)  # not declared: Java sends -2
    for sc, nid in ((3, 3), (3, -1), (1, 1)):
        with pytest.raises(ClientBalanceConfigError) as info:
            validate_node(sc, nid)
        assert isinstance(info.value, ConsumerConfigError)
    with pytest.raises(ClientBalanceConfigError):
        assign_modulo([], 0, 0)
    with pytest.raises(ClientBalanceConfigError):
        assign_modulo([], 2, 2)


def test_bootstrap_offset_validation() -> None:
    assert validate_bootstrap_offset(None) is None
    assert validate_bootstrap_offset(0) == 0
    with pytest.raises(ClientBalanceConfigError):
        validate_bootstrap_offset(-1)


def test_broker_config_list() -> None:
    brokers = parse_broker_config_list(["1:10.0.0.1:8123", "2:10.0.0.2: ", " "])
    assert brokers == {1: BrokerInfo(1, "10.0.0.1", 8123), 2: BrokerInfo(2, "10.0.0.2", 8123)}
    assert parse_broker_config_list(["2:10.0.0.2: "], tls=True)[2].port == 8124


def test_topic_meta_expansion() -> None:
    brokers = parse_broker_config_list(["1:h1:8123", "2:h2:8123"])
    metas = parse_topic_meta_list(["demo#1:2:3:1,2:1:1:0,9:5:5:1", "other#1:1:1:1"], brokers)
    demo1 = {PartitionKey(1, "demo", s * 10000 + i) for s in range(2) for i in range(3)}
    assert {k for k in metas if k.topic == "demo" and k.broker_id == 1} == demo1
    assert not metas[PartitionKey(2, "demo", 0)].subscribable
    assert metas[PartitionKey(1, "other", 0)].subscribable
    assert len(metas) == 6 + 1 + 1  # broker 9 is not in the broker list
    for bad in ["demo", "demo#1:2:3", "#1:1:1:1", "demo#1:x:1:1"]:
        with pytest.raises(MalformedMetaError):
            parse_topic_meta_list([bad], brokers)


def test_part_sub_info() -> None:
    held = [PartitionKey(2, "b", 0), PartitionKey(1, "a", 10001), PartitionKey(1, "a", 0)]
    assert format_part_sub_info(held) == ["a#1:0,1:10001", "b#2:0"]


@given(st.sets(keys, max_size=30))
def test_part_sub_info_round_trip(held: set[PartitionKey]) -> None:
    assert parse_part_sub_info(format_part_sub_info(held)) == held


def test_meta_cache_updates_and_connect_checks() -> None:
    cache = PartitionMetaCache()
    assert not cache.update(broker_config_id=None, wall_ms=1)
    assert cache.update(broker_config_id=5, broker_config_list=["1:h1: "], wall_ms=1)
    assert cache.metas == {}
    assert cache.assigned_time_ms == -1
    assert cache.update(
        broker_config_id=5, topic_meta_id=9, topic_meta_list=["t#1:1:2:1"], wall_ms=1000
    )
    assert cache.assigned_time_ms == 1000
    assert cache.topic_meta_id == 9
    assert cache.subscribable() == {PartitionKey(1, "t", 0): True, PartitionKey(1, "t", 1): True}
    # same ids: ignored; negative id or empty list: ignored (Java storeTopicMetaInfo)
    assert not cache.update(
        broker_config_id=5, topic_meta_id=9, topic_meta_list=["t#1:1:1:0"], wall_ms=2
    )
    assert not cache.update(broker_config_id=5, topic_meta_id=10, wall_ms=2)
    key = PartitionKey(1, "t", 0)
    assert cache.check_connect(key, 0.0) == 200
    assert cache.check_connect(PartitionKey(1, "t", 7), 0.0) == 404
    cache.record_connect_result(key, 410, 10.0)
    assert cache.check_connect(key, 14.9) == 421
    assert cache.check_connect(key, 15.0) == 200
    cache.record_connect_result(key, 200, 15.0)
    assert cache.update(
        broker_config_id=5, topic_meta_id=10, topic_meta_list=["t#1:1:1:0"], wall_ms=3
    )
    assert cache.check_connect(key, 20.0) == 422
    assert cache.unsubscribable([key, PartitionKey(1, "t", 1)]) == [key]
    # a new broker list without broker 1 removes its partitions from the meta
    assert cache.update(broker_config_id=6, broker_config_list=["2:h2:8123"], wall_ms=4)
    assert cache.metas == {}
    assert "partitions=0@10" in repr(cache)


def test_subscription_reporter() -> None:
    reporter = SubscriptionReporter(interval=3)
    a, b = PartitionKey(1, "t", 0), PartitionKey(1, "t", 1)
    assert reporter.next([]) is None  # nothing held yet: no first report
    assert reporter.next([a]) == ["t#1:0"]
    assert reporter.next([a]) is None
    assert reporter.next([a, b]) == ["t#1:0,1:1"]  # changed
    # the interval counter counts unchanged heartbeats only and is never reset (Java)
    assert [reporter.next([a, b]) for _ in range(4)] == [None, ["t#1:0,1:1"], None, None]


def test_v2_builders() -> None:
    flow = FlowControlState()
    body = build_register_v2(
        client=BalanceClient("c-Balance-1", "g", "h", source_count=2, node_id=1),
        topics=["t"],
        topic_conditions=["t#a"],
        ops=OpsTaskIds(flow),
    )
    msg = master_pb.RegisterRequestC2MV2.FromString(body)
    assert (msg.sourceCount, msg.nodeId, list(msg.topicCondition)) == (2, 1, ["t#a"])
    assert (msg.subRepInfo.brokerConfigId, msg.subRepInfo.topicMetaInfoId) == (-2, -2)
    assert not msg.subRepInfo.reportSubInfo
    assert not msg.subRepInfo.HasField("lstAssignedTime")
    assert not msg.HasField("opsTaskInfo")  # every id -2: omitted (§8.1)
    flow.update(default_check_id=3, default_info="[]")
    beat = master_pb.HeartRequestC2MV2.FromString(
        build_heartbeat_v2(
            client_id="c",
            group="g",
            report=SubscriptionReport(5, 9, assigned_time_ms=1000, part_sub_info=("t#1:0",)),
            ops=OpsTaskIds(flow, max_offset_ctrl_id=12),
        )
    )
    assert beat.subRepInfo.reportSubInfo
    assert list(beat.subRepInfo.partSubInfo) == ["t#1:0"]
    assert beat.subRepInfo.lstAssignedTime == 1000
    assert beat.opsTaskInfo.defFlowCheckId == 3
    assert beat.opsTaskInfo.csmFrmMaxOffsetCtrlId == 12
    assert not beat.opsTaskInfo.HasField("groupFlowCheckId")
    meta = master_pb.GetPartMetaRequestC2M.FromString(
        build_get_part_meta(client_id="c", group="g", broker_config_id=5, topic_meta_id=-2)
    )
    assert (meta.brokerConfigId, meta.topicMetaInfoId) == (5, -2)


def test_ops_task_ids_send_only_the_ids_held() -> None:
    only_max = master_pb.OpsTaskInfo()
    assert OpsTaskIds(FlowControlState(), max_offset_ctrl_id=0).fill(only_max)
    assert only_max.HasField("csmFrmMaxOffsetCtrlId")
    assert only_max.csmFrmMaxOffsetCtrlId == 0
    assert not only_max.HasField("defFlowCheckId")
    nothing = master_pb.OpsTaskInfo()
    assert not OpsTaskIds(FlowControlState()).fill(nothing)
    assert nothing.ListFields() == []
