"""ConsumerConfig validation and the topics argument."""

from __future__ import annotations

from typing import Any

import pytest

from tubemq_aio.consumer import Consumer, ConsumerConfig
from tubemq_aio.errors import ClientClosedError, ConfigError
from tubemq_aio.protocol.consumer_meta import ConsumePosition
from tubemq_aio.protocol.tail_check import MAX_LOST_TAIL_WINDOW

MASTER = "127.0.0.1:8715"


def config(**kw: Any) -> ConsumerConfig:
    """A config with defaults for the required fields."""
    kw.setdefault("group", "g1")
    kw.setdefault("topics", ["t1"])
    return ConsumerConfig(masters=MASTER, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topics", "expected"),
    [
        (["t1", "t2"], {"t1": frozenset(), "t2": frozenset()}),
        ("t1, t2", {"t1": frozenset(), "t2": frozenset()}),
        ({"t1": {"a", " b"}, "t2": None}, {"t1": frozenset({"a", "b"}), "t2": frozenset()}),
    ],
)
def test_topics_forms(topics: Any, expected: dict[str, frozenset[str]]) -> None:
    """Lists, comma strings and topic -> filters mappings give the same normalized mapping."""
    assert dict(config(topics=topics).topics) == expected


@pytest.mark.parametrize(
    "kw",
    [
        {"group": ""},
        {"group": "1abc"},
        {"group": "a#b"},
        {"topics": []},
        {"topics": ""},
        {"topics": ["t1", "t1"]},
        {"topics": ["a:b"]},
        {"topics": {"t1": {""}}},
        {"topics": {"t1": {"a,b"}}},
        {"consume_from": "first"},
        {"fetchers": 0},
        {"max_prefetch_batches": 0},
        {"msg_not_found_wait": -1},
        {"confirm_timeout": 0},
        {"close_timeout": 0},
        {"rpc_timeout": 1},
        {"reconnect_delay": 0},
        {"reconnect_delay": float("nan")},
        {"reconnect_delay": "1"},
        {"reconnect_delay_max": float("inf")},
        {"reconnect_delay": 2.0, "reconnect_delay_max": 1.0},
        {"tail_check_depth": -1},
        {"tail_check_depth": 63},
        {"tail_check_depth": True},
        {"tail_check_depth": 1.5},
        {"tail_check_timeout": 0},
        {"tail_check_timeout": float("nan")},
        {"tail_check_timeout": float("inf")},
        {"lost_tail_window": -1},
        {"lost_tail_window": -10240},
        {"lost_tail_window": 2**32 + 1},
        {"lost_tail_window": 2**40 + 1},
        {"lost_tail_window": 10**100},
        {"lost_tail_window": True},
        {"lost_tail_window": False},
        {"lost_tail_window": 1.5},
        {"lost_tail_window": 10240.0},
        {"lost_tail_window": float("nan")},
        {"lost_tail_window": float("inf")},
        {"lost_tail_window": float("-inf")},
        {"lost_tail_window": "10"},
        {"lost_tail_window": None},
    ],
)
def test_invalid_options_raise_config_error(kw: dict[str, Any]) -> None:
    """Every invalid option is a ConfigError (also a ValueError) at construction."""
    with pytest.raises(ConfigError):
        config(**kw)
    with pytest.raises(ValueError, match=r".+"):
        config(**kw)


def test_consume_from_maps_to_java_positions() -> None:
    """The three ``consume_from`` values map to the Java consume positions
    (docs/protocol/consumer.md §9.3)."""
    assert config(consume_from="earliest").position is ConsumePosition.FROM_FIRST_OFFSET
    assert config().position is ConsumePosition.FROM_LATEST_OFFSET
    assert config(consume_from="latest_always").position is ConsumePosition.FROM_MAX_OFFSET_ALWAYS
    assert config(topics={"t1": {"x"}}).filters_of("t1") == frozenset({"x"})
    assert config().filters_of("other") == frozenset()


async def test_consumer_before_start_and_after_close() -> None:
    """getmany needs a started consumer; close without start is fine; start after close fails."""
    consumer = Consumer(MASTER, group="g1", topics=["t1"], fetchers=3)
    assert consumer.config.fetchers == 3
    assert consumer.assignment() == []
    assert consumer.positions() == {}
    with pytest.raises(ClientClosedError):
        await consumer.getmany(timeout=0)
    with pytest.raises(ConfigError):
        await consumer.getmany(max_records=0)
    await consumer.close()
    with pytest.raises(ClientClosedError):  # a loop over a closed consumer is refused
        _ = [m async for m in consumer]
    with pytest.raises(ClientClosedError):
        await consumer.start()
    with pytest.raises(ConfigError):
        Consumer(group="g1", topics=["t1"])


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "1", True, 301])
def test_join_heartbeat_interval_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match="join_heartbeat_interval"):
        Consumer("h:1", group="gg", topics=["t"], join_heartbeat_interval=value)  # type: ignore[arg-type]


def test_join_heartbeat_interval_applies_until_the_first_connect_event() -> None:
    """Heartbeats every ``join_heartbeat_interval`` while the first partitions are awaited,
    then every ``heartbeat_interval``; unset against a master that is not a loopback address,
    ``heartbeat_interval`` throughout (as Java; the loopback rule: test_join_heartbeat.py)."""
    from types import SimpleNamespace

    from tubemq_aio.consumer._session import JOIN_HEARTBEATS_MAX, MasterSession
    from tubemq_aio.protocol.rebalance import MasterHeartbeatState

    def wait(state: MasterHeartbeatState, **options: object) -> float:
        consumer = Consumer("h:1", group="gg", topics=["t"], heartbeat_interval=13, **options)  # type: ignore[arg-type]
        config = consumer.config
        session = SimpleNamespace(config=config, hb_state=state, _join_heartbeats=0)
        return MasterSession._heartbeat_wait(session)  # type: ignore[arg-type]

    joining = MasterHeartbeatState()
    assert wait(joining) == 13
    assert wait(joining, join_heartbeat_interval=1) == 1
    assert wait(joining, join_heartbeat_interval=60) == 13  # never slower than the interval
    joined = MasterHeartbeatState()
    joined.first_connect_pending = False
    assert wait(joined, join_heartbeat_interval=1) == 13
    # A member that never gets a partition goes back to the interval after JOIN_HEARTBEATS_MAX.
    consumer = Consumer(
        "h:1", group="gg", topics=["t"], heartbeat_interval=13, join_heartbeat_interval=1
    )
    session = SimpleNamespace(
        config=consumer.config, hb_state=MasterHeartbeatState(), _join_heartbeats=0
    )
    waits = [MasterSession._heartbeat_wait(session) for _ in range(JOIN_HEARTBEATS_MAX + 2)]  # type: ignore[arg-type]
    assert waits == [1] * JOIN_HEARTBEATS_MAX + [13, 13]


def test_tail_check_defaults_and_off() -> None:
    assert config().tail_check_depth == 16
    assert config().tail_check_timeout == 10.0
    assert config(tail_check_depth=0).tail_check_depth == 0
    assert config().lost_tail_window == 10240 == 10 * 1024  # memCacheMsgCntInK 10 x 1024
    assert config(lost_tail_window=0).lost_tail_window == 0
    assert config(lost_tail_window=50 * 1024).lost_tail_window == 51200
    assert config(lost_tail_window=MAX_LOST_TAIL_WINDOW).lost_tail_window == 2**32


def test_a_bad_lost_tail_window_is_named_with_its_range() -> None:
    for bad in (True, 10240.0, float("nan"), -1, 2**32 + 1):
        with pytest.raises(ConfigError, match=r"lost_tail_window must be an integer in \[0, "):
            config(lost_tail_window=bad)


def test_the_retry_window_is_an_option() -> None:
    assert Consumer("h:8715", group="g1", topics=["t"]).config.unregister_retry_window == 35.0
    consumer = Consumer("h:8715", group="g1", topics=["t"], unregister_retry_window=0)
    assert consumer.config.unregister_retry_window == 0
    for bad in (-1, float("nan"), float("inf"), True, "35", 3601):
        with pytest.raises(ConfigError, match="unregister_retry_window"):
            Consumer("h:8715", group="g1", topics=["t"], unregister_retry_window=bad)  # type: ignore[arg-type]
