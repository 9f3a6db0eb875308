"""BoundConsume validation and its wiring into register / first broker registration."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tubemq_aio.consumer import Consumer, ConsumerConfig
from tubemq_aio.consumer._session import MasterSession
from tubemq_aio.consumer._session_base import ConsumerWiring
from tubemq_aio.consumer.bound import BoundConsume
from tubemq_aio.errors import BoundConsumeError, ConfigError, ConsumerConfigError
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol import consumer_rpc as rpc
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb

MASTER = "127.0.0.1:8715"


def test_valid_bound_normalizes_keys() -> None:
    """Keys are trimmed and the mapping frozen; PartitionKey objects are accepted."""
    b = BoundConsume(" s1 ", 2, False, {" 1:t:0 ": 5, PartitionKey(2, "t", 1): 0})  # type: ignore[dict-item]
    assert b.session_key == "s1"
    assert not b.select_big
    assert dict(b.offsets) == {"1:t:0": 5, "2:t:1": 0}
    assert b.partition_offsets == {PartitionKey(1, "t", 0): 5, PartitionKey(2, "t", 1): 0}
    with pytest.raises(TypeError):
        b.offsets["1:t:0"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("", 1), {}),
        (("  ", 1), {}),
        (("a,b", 1), {}),
        (("s", 0), {}),
        (("s", -1), {}),
        (("s", True), {}),
        (("s", 1.5), {}),
        (("s", 1), {"offsets": {"1:t": 0}}),
        (("s", 1), {"offsets": {"x:t:0": 0}}),
        (("s", 1), {"offsets": {"1::0": 0}}),
        (("s", 1), {"offsets": {"1:t:0": -1}}),
        (("s", 1), {"offsets": {"1:t:0": "5"}}),
        (("s", 1), {"offsets": {"1:t:0": 1, " 1:t:0": 2}}),
        (("s", 1), {"offsets": {3: 0}}),
        (("s", 1), {"offsets": [("1:t:0", 0)]}),
    ],
)
def test_malformed_bound_is_a_config_error(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every malformed argument raises BoundConsumeError, a ConfigError."""
    with pytest.raises(BoundConsumeError) as info:
        BoundConsume(*args, **kwargs)
    assert isinstance(info.value, ConsumerConfigError)
    assert isinstance(info.value, ConfigError)


def test_consumer_refuses_offsets_of_unsubscribed_topics() -> None:
    """A bound offset must name a subscribed topic."""
    with pytest.raises(BoundConsumeError):
        Consumer(MASTER, group="g1", topics=["t"], bound=BoundConsume("s", 1, offsets={"1:u:0": 0}))
    with pytest.raises(BoundConsumeError):
        ConsumerConfig(masters=MASTER, group="g1", topics=["t"], bound="s")  # type: ignore[arg-type]
    c = Consumer(MASTER, group="g1", topics=["t"], bound=BoundConsume("s", 1, offsets={"1:t:0": 0}))
    assert c.config.bound is not None
    assert c.config.bound.source_count == 1


def session(bound: BoundConsume | None) -> MasterSession:
    """A MasterSession on stubs (only the pure parts are exercised)."""
    config = ConsumerConfig(masters=MASTER, group="g1", topics=["t"], bound=bound)  # type: ignore[arg-type]
    broker = SimpleNamespace(client_id="cid")
    stub: Any = None
    engine: Any = SimpleNamespace()  # the session hands it its on_broken hook
    parts = ConsumerWiring(
        stub,
        stub,
        cast(Any, broker),
        engine,
        stub,
        FlowControlState(),
        stub,
        "h",
        time.monotonic,
        False,
    )
    return MasterSession(config, parts)


def test_register_fields_and_not_allocated() -> None:
    """The register carries the bound fields; notAllocated is copied true -> false only."""
    bound = BoundConsume("s1", 3, select_big=False, offsets={"1:t:2": 7, "1:t:0": 9})
    body = bound.session(not_allocated=True)
    data = rpc.build_register(
        client=rpc.ConsumerClient("c", "g1", "h", 1),
        subscription=rpc.Subscription(("t",)),
        flow=FlowControlState(),
        bound=body,
    )
    msg = master_pb.RegisterRequestC2M()
    msg.ParseFromString(data)
    assert msg.requireBound
    assert msg.sessionKey == "s1"
    assert msg.totalCount == 3
    assert not msg.selectBig
    assert msg.notAllocated
    assert msg.requiredPartition == "1:t:0=9,1:t:2=7"

    s = session(bound)
    key0, key2 = PartitionKey(1, "t", 0), PartitionKey(1, "t", 2)
    assert s._bootstrap_offset(key0) == 9
    s._bootstrapped.add(key0)
    assert s._bootstrap_offset(key0) is None  # only until the first successful registration
    assert s._bootstrap_offset(PartitionKey(1, "t", 1)) is None  # not requested
    assert s._bootstrap_offset(key2) == 7
    s.not_allocated = False
    assert s._bootstrap_offset(key2) is None
    s.not_allocated = True
    s.hb_state.first_connect_pending = False
    assert s._bootstrap_offset(key2) is None


def test_not_allocated_follows_answers() -> None:
    """An answer with notAllocated=false ends bootstrapping; true never restores it."""
    s = session(BoundConsume("s", 1, offsets={"1:t:0": 0}))
    s.tokens = cast(Any, SimpleNamespace(apply=lambda *a, **k: None))
    s._apply(consumer_replies.MasterResponse(True, 200, "", not_allocated=True))
    assert s.not_allocated
    s._apply(consumer_replies.MasterResponse(True, 200, "", not_allocated=False))
    s._apply(consumer_replies.MasterResponse(True, 200, "", not_allocated=True))
    assert not s.not_allocated


def test_normal_consumer_has_no_bootstrap() -> None:
    """Without ``bound`` nothing is bootstrapped."""
    s = session(None)
    assert s._bootstrap_offset(PartitionKey(1, "t", 0)) is None
