"""The doubling rest of partitions that keep answering "no new data" (issue 34, part 2):
the pure policy, its place in the flow-control pacing, the config field, and the fetcher."""

from __future__ import annotations

import asyncio
import math
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.config import MSG_NOT_FOUND_MAX_WAIT, ConsumerConfig
from tubemq_aio.errors import ConfigError, ConsumerConfigError
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage
from tubemq_aio.protocol.flow_control import FetchAnswer, FlowControlState, PartitionFlow
from tubemq_aio.protocol.idle_backoff import IdleBackoff
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.partitions import PartitionLeases

# ---- the policy ------------------------------------------------------------------------------


def test_rest_doubles_from_the_base_up_to_the_ceiling() -> None:
    idle = IdleBackoff(400, 3200)
    assert [idle.wait_ms(n) for n in range(1, 8)] == [400, 800, 1600, 3200, 3200, 3200, 3200]
    assert idle.wait_ms(0) == 400  # no empty answer counted yet: the base
    assert idle.wait_ms(10**9) == 3200  # no huge integers, no overflow


def test_a_ceiling_not_a_power_of_two_of_the_base_is_reached_exactly() -> None:
    idle = IdleBackoff(400, 1000)
    assert [idle.wait_ms(n) for n in range(1, 5)] == [400, 800, 1000, 1000]


def test_ceiling_equal_to_base_is_the_fixed_period_and_zero_stays_zero() -> None:
    assert {IdleBackoff(400, 400).wait_ms(n) for n in range(1, 100)} == {400}
    assert {IdleBackoff(0, 5000).wait_ms(n) for n in range(1, 100)} == {0}


@pytest.mark.parametrize(("base", "ceiling"), [(-1, 400), (400, 399), (-5, -1)])
def test_inconsistent_policy_is_refused(base: int, ceiling: int) -> None:
    with pytest.raises(ConsumerConfigError, match="base_ms <= ceiling_ms"):
        IdleBackoff(base, ceiling)


@given(
    base=st.integers(0, 60_000),
    extra=st.integers(0, 600_000),
    counts=st.lists(st.integers(-3, 500), min_size=2, max_size=20),
)
def test_rest_is_monotonic_and_bounded(base: int, extra: int, counts: list[int]) -> None:
    idle = IdleBackoff(base, base + extra)
    waits = [idle.wait_ms(n) for n in sorted(counts)]
    assert waits == sorted(waits)
    assert all(base <= w <= base + extra for w in waits)


# ---- in the pacing of one partition ------------------------------------------------------------


def empty(flow: PartitionFlow, state: FlowControlState, idle: IdleBackoff | None) -> int:
    answer = FetchAnswer(404, base_wait_ms=400)
    return flow.wait_after_fetch(state, answer, now=0.0, hhmm=1200, idle=idle)


def data(flow: PartitionFlow, state: FlowControlState) -> int:
    return flow.wait_after_fetch(state, FetchAnswer(200, 100), now=0.0, hhmm=1200)


def test_pacing_backs_off_on_404_and_returns_to_the_base_with_data() -> None:
    state, flow, idle = FlowControlState(), PartitionFlow(), IdleBackoff(400, 3200)
    assert [empty(flow, state, idle) for _ in range(5)] == [400, 800, 1600, 3200, 3200]
    assert data(flow, state) == 0  # data: fetched again at once
    assert empty(flow, state, idle) == 400  # and the next empty answer starts over


def test_pacing_without_a_policy_keeps_the_fixed_period() -> None:
    state, flow = FlowControlState(), PartitionFlow()
    assert [empty(flow, state, None) for _ in range(5)] == [400] * 5


def test_a_master_frequency_rule_takes_precedence_over_the_backoff() -> None:
    state, flow, idle = FlowControlState(), PartitionFlow(), IdleBackoff(400, 3200)
    rules = '[{"type":1,"rule":[{"zeroCnt":3,"freqInMs":900}]}]'
    assert state.update(group_check_id=1, group_info=rules)
    assert [empty(flow, state, idle) for _ in range(5)] == [400, 800, 900, 900, 900]


# ---- the config field --------------------------------------------------------------------------


def config(**options: Any) -> ConsumerConfig:
    return ConsumerConfig(masters="127.0.0.1:8715", group="g1", topics=["t"], **options)  # type: ignore[arg-type]


def test_default_ceiling_and_its_floor_at_the_base_wait() -> None:
    assert config().msg_not_found_max_wait is None
    assert config().idle_ceiling == MSG_NOT_FOUND_MAX_WAIT == 6.4
    assert config(msg_not_found_wait=8.0).idle_ceiling == 8.0  # never below the base
    assert config(msg_not_found_max_wait=0.4).idle_ceiling == 0.4  # the fixed period
    assert config(msg_not_found_max_wait=30).idle_ceiling == 30


@pytest.mark.parametrize(
    "options",
    [
        {"msg_not_found_max_wait": 0.3},  # below msg_not_found_wait (0.4)
        {"msg_not_found_wait": 2.0, "msg_not_found_max_wait": 1.0},
        {"msg_not_found_max_wait": -1},
        {"msg_not_found_max_wait": math.nan},
        {"msg_not_found_max_wait": math.inf},
        {"msg_not_found_max_wait": 601},
        {"msg_not_found_max_wait": "3"},
        {"msg_not_found_max_wait": True},
    ],
)
def test_bad_ceiling_is_a_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="msg_not_found_max_wait"):
        config(**options)


# ---- the fetcher applies it --------------------------------------------------------------------

BROKER = BrokerInfo(1, "127.0.0.1", 8123)


class SwitchBroker:
    """Answers 404 until ``has_data`` is set, then one message per fetch."""

    def __init__(self) -> None:
        self.astray = AstrayCalls(1.0)  # no call fails here: nothing is noted
        self.has_data = False

    async def get_message(
        self, partition: Partition, *, last_pack_consumed: bool, esc_flow_ctrl: bool
    ) -> GetMessageResponse:
        await asyncio.sleep(0)
        if not self.has_data:
            return GetMessageResponse(False, 404, "none", (), -1, 280, -1, None, False, False)
        msg = RawMessage(1, checksum(b"m"), b"m", 0)
        return GetMessageResponse(True, 200, "OK", (msg,), 0, 280, 0, 0, False, False)

    async def commit(self, partition: Partition, *, consumed: bool) -> OffsetResponse:
        return OffsetResponse(True, 200, "OK", 28, 280)


def expected_rests(count: int, base: int, ceiling: int) -> int:
    idle = IdleBackoff(base, ceiling)
    return sum(idle.wait_ms(n) for n in range(1, count + 1))


async def test_the_fetcher_rests_an_empty_partition_longer_and_longer() -> None:
    """Every 404 rest is the policy's (their sum is exact); data resets the count."""
    cfg = config(msg_not_found_wait=0.02, msg_not_found_max_wait=0.08, fetchers=1)
    leases, stats, broker = PartitionLeases(), ConsumerStats(), SwitchBroker()
    loop = asyncio.get_running_loop()
    leases.add(Partition(BROKER, "t", 0), loop.time())
    engine = FetchEngine(cfg, leases, cast(BrokerRpc, broker), FlowControlState(), stats, loop.time)
    task = loop.create_task(engine.run())
    try:
        await asyncio.sleep(0.5)
        empties = stats.not_found
        assert 4 <= empties <= 12  # 0.5 s of 20, 40, 80, 80... ms rests (25 at a fixed 20 ms)
        assert stats.not_found_wait_ms == expected_rests(empties, 20, 80)
        broker.has_data = True
        batch = await engine.get(None, 2)
        assert len(batch) == 1
        assert await batch.ack()
        broker.has_data = False
        before, rested = stats.not_found, stats.not_found_wait_ms
        await asyncio.sleep(0.1)
        assert stats.not_found > before
        # After data the count starts over: the first rests are 20, 40, ... again.
        assert stats.not_found_wait_ms - rested == expected_rests(stats.not_found - before, 20, 80)
    finally:
        engine.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
