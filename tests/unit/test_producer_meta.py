"""Producer metadata: master strings (docs/protocol/wire.md §4.6), applying register/heartbeat
responses (§4.4–4.7)."""

from __future__ import annotations

import pytest

from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol.producer_master_values import (
    ClusterConfig,
    HeartbeatResponse,
    RegisterResponse,
)
from tubemq_aio.protocol.producer_meta import (
    Broker,
    Partition,
    ProducerMetadata,
    clamp_max_msg_size,
    parse_broker_info,
    parse_topic_info,
)

MIB = 1024 * 1024


def test_broker_info_with_port() -> None:
    assert parse_broker_info("1:10.0.0.1:8125") == Broker(1, "10.0.0.1", 8125)
    assert parse_broker_info("1:10.0.0.1:8125").address == "10.0.0.1:8125"


def test_broker_info_blank_port_defaults() -> None:
    # The master sends "brokerId:host: " (a single space) for the default port.
    assert parse_broker_info("7:host: ").port == 8123
    assert parse_broker_info("7:host: ", tls=True).port == 8124
    assert parse_broker_info("7:host:").port == 8123


@pytest.mark.parametrize("text", ["1:host", "x:host:1", "1::8123", "1:h:p", "1:h:1:2"])
def test_broker_info_malformed(text: str) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_broker_info(text)


BROKERS = {1: Broker(1, "h1", 8123), 2: Broker(2, "h2", 8123)}


def test_topic_info_partition_ids_use_store_base() -> None:
    meta = parse_topic_info("t#2:2:1,1:3:2#", BROKERS)
    assert meta.topic == "t"
    assert meta.max_msg_size is None
    ids = [(p.broker.broker_id, p.partition_id) for p in meta.partitions]
    assert ids == [(1, 0), (1, 1), (1, 2), (1, 10000), (1, 10001), (1, 10002), (2, 0), (2, 1)]
    assert meta.partitions[3].partition_key == "1:t:10000"


def test_topic_info_skips_unknown_broker_and_reads_size() -> None:
    meta = parse_topic_info("t#9:4:1,2:1:1#2097152", BROKERS)
    assert [p.partition_key for p in meta.partitions] == ["2:t:0"]
    assert meta.max_msg_size == 2 * MIB


@pytest.mark.parametrize(("segment", "expected"), [("abc", None), ("", None), ("1", MIB)])
def test_topic_info_size_segment(segment: str, expected: int | None) -> None:
    assert parse_topic_info(f"t#1:1:1#{segment}", BROKERS).max_msg_size == expected


def test_topic_info_without_size_segment() -> None:
    assert parse_topic_info("t#1:1:1", BROKERS).max_msg_size is None


@pytest.mark.parametrize(
    "text", ["t", "#1:1:1#", "t#1:1#", "t#a:1:1#", "t#1:-1:1#", "t#1:10001:1#", "t#1:5000:3#"]
)
def test_topic_info_malformed(text: str) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_topic_info(text, BROKERS)


def test_clamp() -> None:
    assert clamp_max_msg_size(5) == MIB
    assert clamp_max_msg_size(3 * MIB) == 3 * MIB
    assert clamp_max_msg_size(100 * MIB) == 20 * MIB


def test_partition_equality_and_key() -> None:
    a = Partition(Broker(1, "h", 1), "t", 3)
    assert a == Partition(Broker(1, "h", 1), "t", 3)
    assert hash(a) == hash(Partition(Broker(1, "h", 1), "t", 3))
    assert a.partition_key == "1:t:3"


def registered(meta: ProducerMetadata) -> None:
    meta.apply_register(
        RegisterResponse(
            True, 200, "OK!", 55, ("1:h1:8123", "2:h2: "), config=ClusterConfig(7, 2 * MIB)
        ),
        now=0.0,
    )


def test_initial_state() -> None:
    meta = ProducerMetadata()
    assert meta.broker_checksum == -1
    assert meta.config_id == -2
    assert meta.max_message_size("t") == MIB
    assert meta.writable_partitions("t") == ()
    assert meta.brokers() == ()


def test_register_sets_brokers_and_config() -> None:
    meta = ProducerMetadata()
    registered(meta)
    assert meta.broker_checksum == 55
    assert meta.brokers() == (Broker(1, "h1", 8123), Broker(2, "h2", 8123))
    assert meta.config_id == 7
    assert meta.default_max_msg_size == 2 * MIB
    assert "checksum=55" in repr(meta)


def test_failed_register_changes_nothing() -> None:
    meta = ProducerMetadata()
    meta.apply_register(RegisterResponse(False, 400, "bad", -1, ("1:h:1",)), now=0.0)
    assert meta.brokers() == ()
    assert meta.broker_checksum == -1


def test_heartbeat_rebuilds_topics_and_per_topic_size() -> None:
    meta = ProducerMetadata()
    registered(meta)
    meta.apply_heartbeat(
        HeartbeatResponse(True, 200, "OK", 55, topic_infos=("a#1:2:1#", "b#2:1:1#3145728")),
        now=1.0,
    )
    assert [p.partition_key for p in meta.writable_partitions("a")] == ["1:a:0", "1:a:1"]
    assert meta.max_message_size("a") == 2 * MIB
    assert meta.max_message_size("b") == 3 * MIB
    assert meta.topics() == {"a", "b"}
    # A topic missing from the next heartbeat keeps its partitions while its broker is listed
    # (a restarted master reports no topics until the brokers re-sync).
    meta.apply_heartbeat(HeartbeatResponse(True, 200, "OK", 55, topic_infos=("b#2:1:1#",)), 2.0)
    assert [p.partition_key for p in meta.writable_partitions("a")] == ["1:a:0", "1:a:1"]
    assert meta.max_message_size("b") == 2 * MIB
    # Once broker 1 leaves the broker list, the stale partitions go too.
    meta.apply_heartbeat(
        HeartbeatResponse(True, 200, "OK", 77, topic_infos=("b#2:1:1#",), broker_infos=("2:h2:1",)),
        3.0,
    )
    assert meta.writable_partitions("a") == ()


def test_heartbeat_replaces_brokers_only_when_checksum_changes() -> None:
    meta = ProducerMetadata()
    registered(meta)
    # Same checksum: the (absent) broker list is not applied.
    meta.apply_heartbeat(HeartbeatResponse(True, 200, "OK", 55, topic_infos=("a#1:1:1#",)), 1.0)
    assert len(meta.brokers()) == 2
    # New checksum: topics resolve against the new broker list.
    meta.apply_heartbeat(
        HeartbeatResponse(
            True, 200, "OK", 56, topic_infos=("a#1:1:1,3:1:1#",), broker_infos=("3:h3:9000",)
        ),
        2.0,
    )
    assert meta.broker_checksum == 56
    assert meta.brokers() == (Broker(3, "h3", 9000),)
    assert [p.partition_key for p in meta.writable_partitions("a")] == ["3:a:0"]


def test_heartbeat_not_ready_applies_config_only() -> None:
    meta = ProducerMetadata()
    registered(meta)
    meta.apply_heartbeat(
        HeartbeatResponse(True, 201, "", 99, topic_infos=("a#1:1:1#",), config=ClusterConfig(8)),
        1.0,
    )
    assert meta.config_id == 8
    assert meta.broker_checksum == 55
    assert meta.writable_partitions("a") == ()


def test_bad_heartbeat_changes_nothing() -> None:
    meta = ProducerMetadata()
    registered(meta)
    with pytest.raises(RemoteProtocolError):
        meta.apply_heartbeat(
            HeartbeatResponse(True, 200, "", 60, topic_infos=("a#1:1:1#",), broker_infos=("x",)),
            1.0,
        )
    assert meta.broker_checksum == 55
    meta.apply_heartbeat(HeartbeatResponse(False, 411, "unknown", 60), 1.0)
    assert meta.broker_checksum == 55


def test_tls_default_port() -> None:
    meta = ProducerMetadata(tls=True)
    meta.apply_register(RegisterResponse(True, 200, "OK", 1, ("1:h: ",)), 0.0)
    assert meta.broker(1) == Broker(1, "h", 8124)


def test_heartbeat_checksum_forced_after_two_hours() -> None:
    meta = ProducerMetadata()
    registered(meta)  # brokers updated at t=0
    assert meta.heartbeat_checksum(7200.0) == 55
    assert meta.heartbeat_checksum(7200.5) == -1
    assert meta.heartbeat_checksum(7201.0) == 55  # the timer restarted
