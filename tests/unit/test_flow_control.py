"""Flow-control rules and the post-fetch wait (docs/protocol/consumer.md §7), with hand-written rule
JSON."""

from __future__ import annotations

import calendar
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.errors import FlowRuleError, RemoteProtocolError
from tubemq_aio.protocol.flow_control import (
    MB,
    DataLimit,
    DataLimitRule,
    FetchAnswer,
    FlowControlState,
    FreqLimitRule,
    LowFetchRule,
    PartitionFlow,
    gmt8_hhmm,
    parse_flow_rules,
)

# The example of docs/protocol/consumer.md (§7.1), from the upstream project tests.
EXAMPLE = (
    '[{"type":0,"rule":[{"start":"08:00","end":"17:59","dltInM":1024,"limitInM":20,'
    '"freqInMs":1000}]},{"type":1,"rule":[{"zeroCnt":3,"freqInMs":300},{"zeroCnt":8,'
    '"freqInMs":1000}]},{"type":3,"rule":[{"normFreqInMs":0,"filterFreqInMs":100,'
    '"minDataFilterFreqInMs":400}]}]'
)


def utc(y: int, mo: int, d: int, h: int, mi: int) -> float:
    return float(calendar.timegm((y, mo, d, h, mi, 0, 0, 0, 0)))


def test_parse_note_example() -> None:
    rules = parse_flow_rules(EXAMPLE)
    assert rules.data_limits == (DataLimitRule(800, 1759, 1024, 20 * MB, 1000),)
    assert rules.freq_limits == (FreqLimitRule(8, 1000), FreqLimitRule(3, 300))
    assert rules.low_fetch == LowFetchRule(0, 100, 400)


def test_blank_means_no_rules() -> None:
    for text in (None, "", " ", "[]"):
        rules = parse_flow_rules(text)
        assert rules.data_limits == ()
        assert rules.freq_limits == ()
        assert rules.low_fetch.filter_freq_ms == -2  # "no type-3 rule" (§7.2)


def test_data_items_sorted_and_last_record_per_type_wins() -> None:
    text = json.dumps(
        [
            {"type": 1, "rule": [{"zeroCnt": 1, "freqInMs": 5}]},
            {
                "type": 0,
                "rule": [
                    {
                        "start": "20:00",
                        "end": "23:59",
                        "dltInM": 500,
                        "limitInM": 1,
                        "freqInMs": 200,
                    },
                    {
                        "start": "00:00",
                        "end": "07:59",
                        "dltInM": 100,
                        "limitInM": 2,
                        "freqInMs": 300,
                    },
                ],
            },
            {"type": 2, "rule": [{"anything": 1}]},
            {"type": 1, "rule": [{"zeroCnt": 2, "freqInMs": 7}]},
        ]
    )
    rules = parse_flow_rules(text)
    assert [r.start for r in rules.data_limits] == [0, 2000]
    assert rules.freq_limits == (FreqLimitRule(2, 7),)


def test_low_fetch_omitted_fields_default_to_zero() -> None:
    rules = parse_flow_rules('[{"type":3,"rule":[{"normFreqInMs":50}]}]')
    assert rules.low_fetch == LowFetchRule(50, 0, 0)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"type":0}',
        '[{"rule":[]}]',
        '[{"type":4,"rule":[]}]',
        '[{"type":0,"rule":[]}]',
        '[{"type":0,"rule":[{"start":"09:00","end":"08:00","dltInM":50,"limitInM":1,"freqInMs":200}]}]',
        '[{"type":0,"rule":[{"start":"08:00","end":"09:00","dltInM":20,"limitInM":1,"freqInMs":200}]}]',
        '[{"type":0,"rule":[{"start":"08:00","end":"09:00","dltInM":50,"limitInM":-1,"freqInMs":200}]}]',
        '[{"type":0,"rule":[{"start":"08:00","end":"09:00","dltInM":50,"limitInM":1,"freqInMs":199}]}]',
        '[{"type":0,"rule":[{"start":"8h","end":"09:00","dltInM":50,"limitInM":1,"freqInMs":200}]}]',
        '[{"type":0,"rule":[{"start":"08:60","end":"09:00","dltInM":50,"limitInM":1,"freqInMs":200}]}]',
        '[{"type":0,"rule":[{"start":"08:00","end":"25:00","dltInM":50,"limitInM":1,"freqInMs":200}]}]',
        '[{"type":1,"rule":[{"zeroCnt":0,"freqInMs":1}]}]',
        '[{"type":1,"rule":[{"zeroCnt":1,"freqInMs":-1}]}]',
        '[{"type":1,"rule":[{"zeroCnt":true,"freqInMs":1}]}]',
        '[{"type":3,"rule":[{"normFreqInMs":1},{"normFreqInMs":2}]}]',
        '[{"type":3,"rule":[{"filterFreqInMs":100}]}]',
        '[{"type":3,"rule":[{"filterFreqInMs":500,"minDataFilterFreqInMs":400}]}]',
        '[{"type":3,"rule":[{"normFreqInMs":300001}]}]',
    ],
)
def test_invalid_rules(text: str) -> None:
    with pytest.raises(FlowRuleError) as info:
        parse_flow_rules(text)
    assert isinstance(info.value, RemoteProtocolError)


def test_gmt8_time_of_day_crosses_midnight() -> None:
    assert gmt8_hhmm(0.0) == 800  # 1970-01-01 00:00 UTC = 08:00 GMT+8
    assert gmt8_hhmm(utc(2024, 3, 1, 15, 59)) == 2359
    assert gmt8_hhmm(utc(2024, 3, 1, 16, 0)) == 0  # already the next day in GMT+8
    assert gmt8_hhmm(utc(2024, 3, 1, 23, 30)) == 730


@given(st.floats(min_value=0, max_value=4e9))
def test_gmt8_hhmm_is_a_valid_clock_time(t: float) -> None:
    hhmm = gmt8_hhmm(t)
    assert 0 <= hhmm // 100 <= 23
    assert 0 <= hhmm % 100 <= 59


def test_data_limit_window_in_gmt8() -> None:
    rules = parse_flow_rules(EXAMPLE)
    # Java compares the raw dltInM number with currDataDlt bytes (§12 item 1): 2000 > 1024.
    assert rules.data_limit(2000, gmt8_hhmm(utc(2024, 3, 1, 0, 30))) == DataLimit(20 * MB, 1000)
    # 23:30 UTC is 07:30 the next day in GMT+8: before the window.
    assert rules.data_limit(2000, gmt8_hhmm(utc(2024, 3, 1, 23, 30))) is None
    # 09:59 UTC is 17:59 GMT+8 (inclusive end); 10:00 UTC is 18:00, outside.
    assert rules.data_limit(2000, gmt8_hhmm(utc(2024, 3, 1, 9, 59))) is not None
    assert rules.data_limit(2000, gmt8_hhmm(utc(2024, 3, 1, 10, 0))) is None
    assert rules.data_limit(1024, 900) is None  # needs lag > dltInM
    assert rules.data_limit(10**12, 800) is not None  # inclusive start


def test_data_limit_first_matching_item_by_start() -> None:
    text = json.dumps(
        [
            {
                "type": 0,
                "rule": [
                    {
                        "start": "12:00",
                        "end": "23:59",
                        "dltInM": 100,
                        "limitInM": 2,
                        "freqInMs": 400,
                    },
                    {
                        "start": "00:00",
                        "end": "13:00",
                        "dltInM": 5000,
                        "limitInM": 1,
                        "freqInMs": 300,
                    },
                ],
            }
        ]
    )
    rules = parse_flow_rules(text)
    assert rules.data_limit(6000, 1230) == DataLimit(MB, 300)  # earlier start wins
    assert rules.data_limit(200, 1230) == DataLimit(2 * MB, 400)
    assert rules.data_limit(200, 1100) is None


def test_freq_limit() -> None:
    rules = parse_flow_rules(EXAMPLE)
    assert [rules.freq_limit(n, 400) for n in (1, 2, 3, 7, 8, 100)] == [
        400,
        400,
        300,
        300,
        1000,
        1000,
    ]


def test_state_update_rules() -> None:
    state = FlowControlState()
    assert (state.default.check_id, state.group.check_id, state.qry_priority_id) == (-2, -2, -2)
    assert state.update(group_check_id=5, group_info=EXAMPLE, qry_priority_id=301)
    assert state.group.check_id == 5
    assert state.qry_priority_id == 301
    assert state.group.rules.freq_limits
    # same id: nothing; "disabled" answer (-2, " "): old rules kept (§7.4, §12 item 9)
    assert not state.update(group_check_id=5, group_info="[]")
    assert not state.update(group_check_id=-2, group_info=" ", qry_priority_id=-2)
    assert state.group.rules.freq_limits
    assert state.qry_priority_id == 301
    # malformed JSON raises and keeps the old id, so the master resends it
    with pytest.raises(FlowRuleError):
        state.update(default_check_id=9, default_info="[{")
    assert state.default.check_id == -2
    assert state.update(default_check_id=9, default_info=" ")
    assert state.default.check_id == 9
    assert not state.default.rules.data_limits
    assert "group=5" in repr(state)


def test_esc_flow_ctrl_is_reevaluated_every_10s() -> None:
    state = FlowControlState()
    assert not state.esc_flow_ctrl(0.0, 900)
    state.update(group_check_id=1, group_info=EXAMPLE)
    assert state.esc_flow_ctrl(1.0, 900)
    assert state.esc_flow_ctrl(5.0, 1900)  # cached
    assert not state.esc_flow_ctrl(11.0, 1900)


def fetch(
    flow: PartitionFlow,
    state: FlowControlState,
    now: float,
    *,
    hhmm: int = 900,
    filter_consume: bool = False,
    **answer: object,
) -> int:
    args: dict[str, object] = {"err_code": 200, **answer}
    return flow.wait_after_fetch(
        state,
        FetchAnswer(**args),  # type: ignore[arg-type]
        now=now,
        hhmm=hhmm,
        filter_consume=filter_consume,
    )


def test_wait_without_rules() -> None:
    flow, state = PartitionFlow(), FlowControlState()
    assert fetch(flow, state, 0.0, body_bytes=1000) == 0
    assert fetch(flow, state, 1.0, err_code=404, base_wait_ms=400) == 400
    assert fetch(flow, state, 2.0, err_code=503, base_wait_ms=300) == 300
    assert flow.zero_count == 1  # errors other than 404 do not touch the count


def test_zero_fetch_frequency_rules() -> None:
    flow, state = PartitionFlow(), FlowControlState()
    state.update(default_check_id=1, default_info=EXAMPLE)
    waits = [fetch(flow, state, float(i), err_code=404, base_wait_ms=400) for i in range(9)]
    assert waits == [400, 400, 300, 300, 300, 300, 300, 1000, 1000]
    assert fetch(flow, state, 10.0, body_bytes=10) == 0  # success resets the count
    assert flow.zero_count == 0
    # the group's type-1 rules win over the default handler's
    state.update(group_check_id=2, group_info='[{"type":1,"rule":[{"zeroCnt":1,"freqInMs":50}]}]')
    assert fetch(flow, state, 11.0, err_code=404, base_wait_ms=400) == 50


def test_data_limit_pacing_and_escape() -> None:
    flow, state = PartitionFlow(), FlowControlState()
    state.update(default_check_id=1, default_info=EXAMPLE)
    limit = 20 * MB
    # first answer carries the lag; counters restart with the new limit (Java order)
    assert fetch(flow, state, 0.0, body_bytes=100, curr_data_dlt=5000) == 0
    assert fetch(flow, state, 1.0, body_bytes=limit // 12) == 1000
    assert fetch(flow, state, 1.5, body_bytes=10, esc_flow_ctrl=True) == 0
    assert fetch(flow, state, 2.0, err_code=404, base_wait_ms=1500) == 1500  # zero rule base
    assert fetch(flow, state, 6.0, body_bytes=1) == 0  # 5 s slice counter reset
    assert fetch(flow, state, 7.0, body_bytes=limit) == 1000  # minute budget used up
    assert fetch(flow, state, 61.0, body_bytes=1, hhmm=1900) == 0  # window over


def test_low_fetch_waits_after_success() -> None:
    flow, state = PartitionFlow(), FlowControlState()
    state.update(default_check_id=1, default_info=EXAMPLE)
    # type-3 rules are picked up at the first limit recompute after a lag was seen
    assert fetch(flow, state, 0.0, curr_data_dlt=0, filter_consume=True) == 100
    assert fetch(flow, state, 1.0, filter_consume=True, require_slow=True) == 400
    assert fetch(flow, state, 2.0) == 0
    other = PartitionFlow()
    assert fetch(other, state, 0.0, filter_consume=True) == 0  # no lag seen yet
