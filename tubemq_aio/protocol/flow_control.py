"""Flow-control rules pushed by the master and the client pacing algorithm
(docs/protocol/consumer.md §7).

:class:`FlowControlState` keeps the cluster-default and group rule sets (JSON + id each) and the
``qryPriorityId``; :class:`PartitionFlow` computes the wait after each fetch (Java
``PartitionExt.procConsumeResult``). Rule windows are GMT+8 (§7.1, §12 item 10): callers pass
``hhmm`` (``hour*100 + minute``, see :func:`gmt8_hhmm`); ``now`` is monotonic float seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tubemq_aio.errors import FlowRuleError
from tubemq_aio.protocol.consumer_meta import META_VALUE_UNDEFINED
from tubemq_aio.protocol.idle_backoff import IdleBackoff

__all__ = [
    "LIMIT_UPDATE_PERIOD",
    "MB",
    "SAMPLING_PERIOD",
    "DataLimit",
    "DataLimitRule",
    "FetchAnswer",
    "FlowControlState",
    "FlowRules",
    "FreqLimitRule",
    "LowFetchRule",
    "PartitionFlow",
    "RuleSet",
    "gmt8_hhmm",
    "parse_flow_rules",
]

MB = 1024 * 1024
#: ``CFG_FC_MAX_LIMITING_DURATION`` / ``CFG_FC_MAX_SAMPLING_PERIOD`` in seconds (§7.3 step 2).
LIMIT_UPDATE_PERIOD = 60.0
SAMPLING_PERIOD = 5.0
#: How often the group's "data limit active" flag (``escFlowCtrl``) is re-evaluated (§4.1).
ESC_CHECK_PERIOD = 10.0
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def gmt8_hhmm(unix_time: float) -> int:
    """Time of day in GMT+8 as ``hour*100 + minute`` for a Unix timestamp (seconds)."""
    minutes = int((unix_time + 8 * 3600) // 60) % (24 * 60)
    return (minutes // 60) * 100 + minutes % 60


@dataclass(frozen=True, slots=True)
class DataLimitRule:
    """Type 0 item: lag > ``dlt_in_m`` within ``[start, end]`` allows ``limit_bytes``/minute."""

    start: int
    end: int
    dlt_in_m: int
    limit_bytes: int
    freq_ms: int


@dataclass(frozen=True, slots=True)
class FreqLimitRule:
    """Type 1 item: after ``zero_cnt`` consecutive empty fetches wait ``freq_ms``."""

    zero_cnt: int
    freq_ms: int


@dataclass(frozen=True, slots=True)
class LowFetchRule:
    """Type 3 item: waits after successful fetches (0 when a field is omitted)."""

    norm_freq_ms: int = 0
    filter_freq_ms: int = 0
    min_data_filter_freq_ms: int = 0


#: No type-3 rule: -2 everywhere means "no extra wait" (§7.2).
_NO_LOW_FETCH = LowFetchRule(META_VALUE_UNDEFINED, META_VALUE_UNDEFINED, META_VALUE_UNDEFINED)


@dataclass(frozen=True, slots=True)
class DataLimit:
    """A data-limit decision: at most ``limit_bytes`` per 60 s, else wait ``freq_ms``."""

    limit_bytes: int
    freq_ms: int


@dataclass(frozen=True, slots=True)
class FlowRules:
    """One parsed rule set (data limits sorted by start, freq limits by zeroCnt descending)."""

    data_limits: tuple[DataLimitRule, ...] = ()
    freq_limits: tuple[FreqLimitRule, ...] = ()
    low_fetch: LowFetchRule = _NO_LOW_FETCH

    def data_limit(self, lag: int, hhmm: int) -> DataLimit | None:
        """The active data limit for a data lag at a GMT+8 time of day (§7.2).

        ``lag`` is ``currDataDlt`` in bytes compared with the raw ``dltInM`` number, as Java does
        (the broker limits the same way; §11 item 1, §12 item 1).
        """
        rules = self.data_limits
        if not rules or lag < min(r.dlt_in_m for r in rules):
            return None
        if not min(r.start for r in rules) <= hhmm <= max(r.end for r in rules):
            return None
        for rule in self.data_limits:
            if lag > rule.dlt_in_m and rule.start <= hhmm <= rule.end:
                return DataLimit(rule.limit_bytes, rule.freq_ms)
        return None

    def freq_limit(self, zero_cnt: int, default_ms: int) -> int:
        """The wait after ``zero_cnt`` consecutive empty fetches, else ``default_ms`` (§7.2)."""
        for rule in self.freq_limits:
            if zero_cnt >= rule.zero_cnt:
                return rule.freq_ms
        return default_ms


def _get_int(obj: dict[str, Any], name: str, where: str) -> int:
    if name not in obj:
        raise FlowRuleError(f"field {name} is required in {where}")
    value = obj[name]
    try:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(value)
        return int(value)
    except ValueError:
        raise FlowRuleError(f"field {name} of {where} is not an integer") from None


def _get_time(obj: dict[str, Any], name: str, where: str) -> int:
    text = obj.get(name)
    if not isinstance(text, str) or text.count(":") != 1:
        raise FlowRuleError(f"field {name} of {where} must be 'HH:MM'")
    hour_text, minute_text = (p.strip() for p in text.split(":"))
    if not (hour_text.isdigit() and minute_text.isdigit()):
        raise FlowRuleError(f"field {name} of {where} must be 'HH:MM'")
    hour, minute = int(hour_text), int(minute_text)
    # Java accepts hour 24 (its message says 0-23); "24:00" works as an end of day.
    if hour > 24 or minute > 59:
        raise FlowRuleError(f"field {name} of {where} is out of range")
    return hour * 100 + minute


def _parse_data_limits(items: list[Any], where: str) -> tuple[DataLimitRule, ...]:
    if not items:
        raise FlowRuleError(f"no rule item in {where}")
    rules = []
    for item in items:
        start = _get_time(item, "start", where)
        end = _get_time(item, "end", where)
        if start >= end:
            raise FlowRuleError(f"start must be before end in {where}")
        dlt = _get_int(item, "dltInM", where)
        limit = _get_int(item, "limitInM", where)
        freq = _get_int(item, "freqInMs", where)
        if dlt <= 20 or limit < 0 or freq < 200:
            raise FlowRuleError(f"dltInM > 20, limitInM >= 0, freqInMs >= 200 needed in {where}")
        rules.append(DataLimitRule(start, end, dlt, limit * MB, freq))
    return tuple(sorted(rules, key=lambda r: r.start))


def _parse_freq_limits(items: list[Any], where: str) -> tuple[FreqLimitRule, ...]:
    if not items:
        raise FlowRuleError(f"no rule item in {where}")
    rules = []
    for item in items:
        zero_cnt = _get_int(item, "zeroCnt", where)
        freq = _get_int(item, "freqInMs", where)
        if zero_cnt < 1 or freq < 0:
            raise FlowRuleError(f"zeroCnt >= 1 and freqInMs >= 0 needed in {where}")
        rules.append(FreqLimitRule(zero_cnt, freq))
    return tuple(sorted(rules, key=lambda r: -r.zero_cnt))


def _parse_low_fetch(items: list[Any], where: str) -> LowFetchRule:
    if len(items) != 1:
        raise FlowRuleError(f"exactly one rule item allowed in {where}")
    item = items[0]
    values = {"normFreqInMs": 0, "filterFreqInMs": 0, "minDataFilterFreqInMs": 0}
    if "filterFreqInMs" in item or "minDataFilterFreqInMs" in item:
        values["filterFreqInMs"] = _get_int(item, "filterFreqInMs", where)
        values["minDataFilterFreqInMs"] = _get_int(item, "minDataFilterFreqInMs", where)
    if "normFreqInMs" in item:
        values["normFreqInMs"] = _get_int(item, "normFreqInMs", where)
    norm, filt, min_data = values.values()
    if any(not 0 <= v <= 300000 for v in values.values()) or min_data < filt:
        raise FlowRuleError(f"values not in [0, 300000] or minData < filter in {where}")
    return LowFetchRule(norm, filt, min_data)


def parse_flow_rules(text: str | None) -> FlowRules:
    """Parse a flow-control JSON array (§7.1). Blank or ``None`` means no rules.

    Raises:
        FlowRuleError: malformed JSON or a rule breaks a constraint.
    """
    if text is None or not text.strip():
        return FlowRules()
    try:
        records = json.loads(text)
    except ValueError as exc:
        raise FlowRuleError(f"flow-control info is not JSON: {exc}") from None
    if not isinstance(records, list):
        raise FlowRuleError("flow-control info must be a JSON array")
    data: tuple[DataLimitRule, ...] = ()
    freq: tuple[FreqLimitRule, ...] = ()
    low = _NO_LOW_FETCH
    for number, record in enumerate(records, 1):
        where = f"record {number}"
        if record is None:
            continue
        if not isinstance(record, dict):
            raise FlowRuleError(f"{where} is not an object")
        rule_type = _get_int(record, "type", where)
        if not 0 <= rule_type <= 3:
            raise FlowRuleError(f"type of {where} must be 0, 1 or 3")
        if rule_type == 2:  # SSD transfer: deprecated, ignored (§7.1)
            continue
        items = record.get("rule")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise FlowRuleError(f"{where} needs a 'rule' array of objects")
        # At most one record per type is kept: the last one wins (§7.1).
        if rule_type == 0:
            data = _parse_data_limits(items, where)
        elif rule_type == 1:
            freq = _parse_freq_limits(items, where)
        else:
            low = _parse_low_fetch(items, where)
    return FlowRules(data, freq, low)


@dataclass(slots=True)
class RuleSet:
    """One rule set held by the client: its check id (-2 = none yet) and parsed rules."""

    check_id: int = META_VALUE_UNDEFINED
    rules: FlowRules = field(default_factory=FlowRules)

    def apply(self, check_id: int | None, info: str | None) -> bool:
        """Take a pushed (id, JSON) pair; True if applied.

        Java applies only ids >= 0 that differ; a "disabled" answer (-2, " ") keeps the old
        rules (§7.4, §12 item 9). A parse failure raises and keeps the old id, so the master
        sends the JSON again on the next heartbeat.
        """
        if check_id is None or check_id < 0 or check_id == self.check_id:
            return False
        self.rules = parse_flow_rules(info)
        self.check_id = check_id
        return True


class FlowControlState:
    """The consumer's default and group :class:`RuleSet` and ``qryPriorityId`` (§7.4).

    Send ``default.check_id`` / ``group.check_id`` / ``qry_priority_id`` in every master call.
    """

    def __init__(self) -> None:
        self.default = RuleSet()
        self.group = RuleSet()
        self.qry_priority_id = META_VALUE_UNDEFINED
        self._esc_checked_at: float | None = None
        self._esc = False

    def __repr__(self) -> str:
        return (
            f"<FlowControlState def={self.default.check_id} group={self.group.check_id} "
            f"qryPriorityId={self.qry_priority_id}>"
        )

    def update(
        self,
        *,
        default_check_id: int | None = None,
        default_info: str | None = None,
        group_check_id: int | None = None,
        group_info: str | None = None,
        qry_priority_id: int | None = None,
    ) -> bool:
        """Apply the flow fields of a register/heartbeat response (absent fields are None).

        ``qryPriorityId`` is taken together with a group rule change, and only when not -2.
        Returns True if anything changed; raises :class:`FlowRuleError` for malformed JSON.
        """
        changed = self.default.apply(default_check_id, default_info)
        if self.group.apply(group_check_id, group_info):
            changed = True
            self._esc_checked_at = None
            if qry_priority_id is not None and qry_priority_id != META_VALUE_UNDEFINED:
                self.qry_priority_id = qry_priority_id
        return changed

    def esc_flow_ctrl(self, now: float, hhmm: int) -> bool:
        """``GetMessageRequestC2B.escFlowCtrl``: the group's own data limit is active (§4.1).

        Re-evaluated at most every 10 s. Go sends the inverse; we follow Java."""
        if self._esc_checked_at is None or now - self._esc_checked_at >= ESC_CHECK_PERIOD:
            self._esc_checked_at = now
            self._esc = self.group.rules.data_limit(_LONG_MAX, hhmm) is not None
        return self._esc


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """What one fetch's answer tells the pacing of its partition (§4.1, §7.3).

    Attributes:
        err_code: the GetMessage ``errCode`` (200 data, 404 nothing new, other errors).
        body_bytes: body bytes of the delivered (post-filter) messages; 0 on errors.
        base_wait_ms: 0 on success, else :func:`fetch_error_reaction`'s wait (ms).
        esc_flow_ctrl: the answer's ``escFlowCtrl`` (False if absent).
        curr_data_dlt: the answer's ``currDataDlt`` (-1 if absent).
        require_slow: the answer's ``requireSlow`` (False if absent).
    """

    err_code: int
    body_bytes: int = 0
    base_wait_ms: int = 0
    esc_flow_ctrl: bool = False
    curr_data_dlt: int = -1
    require_slow: bool = False


class PartitionFlow:
    """Per-partition pacing state: the wait after each fetch (§7.3)."""

    def __init__(self) -> None:
        self.recv_in_min = 0
        self.recv_in_slice = 0
        self.zero_count = 0
        self.last_data_dlt = META_VALUE_UNDEFINED
        self._limit = DataLimit(_INT_MAX, 20)
        self._low_fetch = _NO_LOW_FETCH
        self._next_limit_update: float | None = None
        self._next_stat = 0.0

    def wait_after_fetch(
        self,
        state: FlowControlState,
        answer: FetchAnswer,
        *,
        now: float,
        hhmm: int,
        filter_consume: bool = False,
        idle: IdleBackoff | None = None,
    ) -> int:
        """Milliseconds the partition should wait before its next fetch.

        Args:
            state: the consumer's rule sets.
            answer: what the fetch's answer said (:class:`FetchAnswer`).
            now: monotonic seconds.
            hhmm: GMT+8 time of day (:func:`gmt8_hhmm`).
            filter_consume: the topic is consumed with filters.
            idle: the rest after consecutive empty answers (404): doubled from
                ``answer.base_wait_ms`` per empty answer up to its ceiling; None keeps
                ``base_wait_ms`` (the official clients' fixed period). A master frequency rule
                (type 1) matching the count of empty answers still takes precedence (§7.2).

        Returns:
            The wait. For releases after a success the caller subtracts the time elapsed since
            the response; any result ≤ 10 ms means "idle at once".
        """
        err_code, body_bytes, base_wait_ms = answer.err_code, answer.body_bytes, answer.base_wait_ms
        if answer.curr_data_dlt >= 0:
            self.last_data_dlt = answer.curr_data_dlt
        self.recv_in_min += body_bytes
        self.recv_in_slice += body_bytes
        self._recompute(state, now, hhmm)
        if err_code not in (200, 404):
            return base_wait_ms
        # Only an empty 404 counts as a zero fetch; any other answer resets the count.
        self.zero_count = self.zero_count + 1 if err_code == 404 and body_bytes == 0 else 0
        if self.zero_count > 0:
            rules = state.group.rules if state.group.rules.freq_limits else state.default.rules
            rest = base_wait_ms if idle is None else idle.wait_ms(self.zero_count)
            return rules.freq_limit(self.zero_count, rest)
        if answer.esc_flow_ctrl:
            return 0
        limit = self._limit
        if self.recv_in_min >= limit.limit_bytes or self.recv_in_slice >= limit.limit_bytes // 12:
            return max(limit.freq_ms, base_wait_ms)
        if err_code == 200:
            low = self._low_fetch
            if filter_consume and low.filter_freq_ms >= 0:
                return low.min_data_filter_freq_ms if answer.require_slow else low.filter_freq_ms
            if not filter_consume and low.norm_freq_ms >= 0:
                return low.norm_freq_ms
        return base_wait_ms

    def _recompute(self, state: FlowControlState, now: float, hhmm: int) -> None:
        if self._next_limit_update is None or now > self._next_limit_update:
            self.recv_in_min = 0
            self.recv_in_slice = 0
            if self.last_data_dlt < 0:
                # No lag seen yet: practically unlimited (Java keeps its type-3 item unchanged).
                self._limit = DataLimit(_INT_MAX, 20)
            else:
                self._limit = (
                    state.group.rules.data_limit(self.last_data_dlt, hhmm)
                    or state.default.rules.data_limit(self.last_data_dlt, hhmm)
                    or DataLimit(_LONG_MAX, 0)
                )
                low = state.group.rules.low_fetch
                self._low_fetch = low if low.filter_freq_ms >= 0 else state.default.rules.low_fetch
            self._next_limit_update = now + LIMIT_UPDATE_PERIOD
            self._next_stat = now + SAMPLING_PERIOD
        elif now > self._next_stat:
            self.recv_in_slice = 0
            self._next_stat = now + SAMPLING_PERIOD
