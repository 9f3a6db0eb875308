"""Consumer configuration: :class:`ConsumerConfig` on top of the shared :class:`ClientConfig`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from types import MappingProxyType
from typing import Any, Literal, Self, Unpack

from tubemq_aio._url_keys import BoundParts
from tubemq_aio.checks import Checks
from tubemq_aio.config import ClientConfig, ClientOptions, HostPort, is_loopback_host
from tubemq_aio.consumer._listeners import PartitionsCallback
from tubemq_aio.consumer.bound import BoundConsume
from tubemq_aio.errors import BoundConsumeError, ConfigError, ConsumerConfigError
from tubemq_aio.protocol.consumer_meta import ConsumePosition
from tubemq_aio.protocol.consumer_names import validate_group_name, validate_subscriptions
from tubemq_aio.protocol.event_pacing import DEFAULT_EVENT_MIN_INTERVAL
from tubemq_aio.protocol.tail_check import (
    DEFAULT_LOST_TAIL_WINDOW,
    DEFAULT_TAIL_CHECK_DEPTH,
    MAX_LOST_TAIL_WINDOW,
)
from tubemq_aio.protocol.time_search import require_aware

__all__ = [
    "CONSUME_FROM",
    "JOIN_HEARTBEAT_OFF",
    "LOOPBACK_JOIN_HEARTBEAT",
    "MSG_NOT_FOUND_MAX_WAIT",
    "ConsumeFrom",
    "ConsumerConfig",
    "ConsumerFields",
    "ConsumerOptions",
    "ConsumerUrlOptions",
    "TopicsArg",
    "join_heartbeat_in_effect",
    "normalize_topics",
]

#: Accepted ``consume_from`` values and the Java consume position each maps to
#: (docs/protocol/consumer.md §9.3).
ConsumeFrom = Literal["latest", "earliest", "latest_always"]
CONSUME_FROM: Mapping[str, ConsumePosition] = MappingProxyType(
    {
        "earliest": ConsumePosition.FROM_FIRST_OFFSET,
        "latest": ConsumePosition.FROM_LATEST_OFFSET,
        "latest_always": ConsumePosition.FROM_MAX_OFFSET_ALWAYS,
    }
)

#: Default ceiling (seconds) of the doubling rest of a partition that keeps answering "no new
#: data" (``ConsumerConfig.msg_not_found_max_wait``; rests 0.4, 0.8, 1.6, 3.2, 6.4 s): an idle
#: partition costs one request per 6.4 s instead of one per 0.4 s, and a first message after
#: an idle spell of 6 s or more waits at most 6.4 s (3.2 s on average). Chosen from the scale
#: benchmark: 2 048 idle partitions cost 7.1 % of a core at 3.2 s, about 0.8 % plus 0.1 ms per
#: fetch, so 5 s would land on the 5 % goal and 6.4 s is about 4 % (docs/benchmarks.md).
MSG_NOT_FOUND_MAX_WAIT = 6.4

#: ``join_heartbeat_interval`` in effect when it is left automatic (``None``) and every master
#: address is a loopback address: a development cluster, such as ``LocalCluster`` or the one
#: ``tubemq-aio cluster up`` starts, whose master balances every 2 s, so a new member's first
#: partitions come about 1 s after that instead of one 13 s heartbeat period after its start
#: (docs/protocol/consumer.md §2.7).
LOOPBACK_JOIN_HEARTBEAT = 1.0
#: ``join_heartbeat_interval=0``: no join heartbeats, ``heartbeat_interval`` throughout (Java).
JOIN_HEARTBEAT_OFF = 0.0


def join_heartbeat_in_effect(setting: float | None, masters: Iterable[HostPort]) -> float | None:
    """The interval of the master heartbeats a consumer sends while it waits for its first
    partitions, from its ``join_heartbeat_interval`` setting and its master addresses.

    Args:
        setting: ``None`` (automatic), :data:`JOIN_HEARTBEAT_OFF` (0), or seconds (> 0).
        masters: the consumer's master addresses.

    Returns:
        Seconds, or ``None`` for no join heartbeats (``heartbeat_interval`` throughout). An
        explicit setting wins: 0 gives ``None``, seconds themselves. Automatic gives
        :data:`LOOPBACK_JOIN_HEARTBEAT` when every master address is a loopback address
        (:func:`~tubemq_aio.config.is_loopback_host`: 127.0.0.0/8, ``::1``, ``localhost``),
        else ``None``: against a production cluster a consumer heartbeats as the Java client
        does. A loopback master that is a production one pays at most 30 extra heartbeats per
        join (``JOIN_HEARTBEATS_MAX``).
    """
    if setting is not None:
        return None if setting == JOIN_HEARTBEAT_OFF else setting
    hosts = [m.host for m in masters]
    if hosts and all(is_loopback_host(h) for h in hosts):
        return LOOPBACK_JOIN_HEARTBEAT
    return None


#: What ``topics=`` accepts: ``"t1,t2"``, topic names, or ``topic -> msgType filters``.
TopicsArg = str | Iterable[str] | Mapping[str, str | Iterable[str] | None]


def normalize_topics(topics: TopicsArg) -> Mapping[str, frozenset[str]]:
    """Turn the ``topics`` argument into a read-only ``topic -> msgType filters`` mapping.

    A string is never iterated character by character: ``"t1,t2"`` is two topics, and a filter
    given as one string (``{"t": "type1"}``) is one filter item.

    Args:
        topics: ``"t1,t2"``, an iterable of names, or a mapping ``topic -> filters`` (``None``,
            an empty set, one filter string, or a collection of filter strings).

    Returns:
        Trimmed, validated names with their filter sets.

    Raises:
        ConsumerConfigError: no topic, a bad name or filter, a wrong type, or a duplicate.
    """
    checks = Checks("topics", error=ConsumerConfigError)
    mapping: dict[str, Iterable[str] | None] = {}
    if isinstance(topics, Mapping):
        for topic, filters in topics.items():
            if not isinstance(topic, str):
                checks.problem(f"topic names must be strings, got {type(topic).__name__}")
            elif filters is not None:
                mapping[topic] = checks.names(f"the filters of {topic!r}", filters)
            else:
                mapping[topic] = None
    else:
        for name in checks.names("topics", topics, split=True, unique=False):
            if name in mapping:
                checks.problem(f"topic {name!r} subscribed twice")
            mapping[name] = None
    checks.done()
    return MappingProxyType(validate_subscriptions(mapping))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    """Options of a :class:`~tubemq_aio.consumer.Consumer` (on top of :class:`ClientConfig`).

    Attributes:
        group: the consumer group (``^[a-zA-Z][\\w-]+$``).
        topics: topic -> set of ``msgType`` filters (empty: no filter); also accepts a list.
        consume_from: where a group without a stored offset starts: ``"latest"`` (default),
            ``"earliest"``, or ``"latest_always"`` (jump to the end on every start, §9.3); or
            a timezone-aware ``datetime``: each partition's first registration in this process
            starts at its first message stamped (``msg_time``) at or after that time, whatever
            the group stored (docs/protocol/time.md). A naive datetime is refused.
        msg_time_zone: the zone producers wrote ``msg_time`` in (a wall time without zone);
            used by time searches. Default UTC.
        time_search_timeout: seconds a time search (``consume_from`` time at start,
            ``offsets_for_times``) may take in all (60 s).
        time_search_concurrency: partitions a time search reads at once (8; each
            partition's reads stay one after the other; 1 searches them one by one).
        fetchers: concurrent fetch loops (each fetches one partition at a time).
        max_prefetch_batches: fetched batches buffered ahead of the application; when the buffer
            is full, fetching stops (backpressure).
        msg_not_found_wait: seconds a partition rests after the broker said "no new data"
            (Java ``msgNotFoundWaitPeriodMs``, 0.4 s).
        msg_not_found_max_wait: the longest rest of a partition that keeps answering "no new
            data": the rest doubles from ``msg_not_found_wait`` after each consecutive empty
            answer up to this many seconds, and is back to ``msg_not_found_wait`` at the first
            answer with data. None (default): :data:`MSG_NOT_FOUND_MAX_WAIT` (6.4 s), or
            ``msg_not_found_wait`` when that is longer; a value must be at least
            ``msg_not_found_wait`` (equal gives the official clients' fixed period). It bounds
            an idle consumer's requests to about ``partitions / msg_not_found_max_wait`` a
            second and adds at most this much latency to the first message of a partition that
            was idle (``docs/consumer.md``). :attr:`idle_ceiling` is the value in effect.
        confirm_in_local: confirm batches without a commit RPC; the flag rides on the next fetch
            or the unregister (Java ``pullConfirmInLocal``).
        confirm_timeout: seconds after which an unacknowledged batch is taken back and
            redelivered (Java ``pullProtectConfirmTimeoutMs``, 60 s).
        rebalance_confirm_wait: seconds a revoked partition waits for its batch to be acked
            before being released anyway (Java ``pullRebConfirmWaitPeriodMs``, 3 s).
        rebalance_min_interval: seconds from the start of one rebalance event to the start of
            the next (0.5 s; 0 disables): the most often the consumer answers the master's
            events, and so the bound on the heartbeats and broker registers they cause, whatever
            the master sends (:class:`~tubemq_aio.protocol.event_pacing.EventPacer`).
        register_attempts: master register attempts at start (Java: 5), counted as time: the
            register keeps trying for ``(register_attempts - 1) * register_fail_wait`` seconds,
            so failures that come fast do not use the attempts up.
        deliver_corrupt: deliver messages whose CRC did not match (``Message.crc_ok`` False)
            instead of dropping them; they are counted either way.
        auto_ack: ``async for`` acks a batch once all its messages were yielded and the loop
            asks for the next one; ``False`` leaves it to :meth:`Consumer.commit` (manual ack).
        close_timeout: seconds :meth:`Consumer.close` spends on unregistering and closing at the
            master before giving up on the server side.
        bound: bound consumption (:class:`~tubemq_aio.consumer.bound.BoundConsume`): start the
            requested partitions at exactly the given offsets; ``None`` (default) = normal.
        reconnect_delay: seconds a :class:`~tubemq_aio.consumer.ClientBalancedConsumer` waits
            before re-connecting a partition lost with its broker (0.2 s); the wait doubles
            after each failed attempt.
        reconnect_delay_max: the cap of that doubling wait (5 s).
        callback_timeout: seconds an ``on_assigned`` / ``on_revoked`` call may take (a
            coroutine it returns included) before it is abandoned and the consumer goes on
            (10 s); a rebalance or ``close()`` never waits longer on the application.
        join_heartbeat_interval: seconds between master heartbeats while the consumer waits
            for its first partitions (from the register until the first connect event, at
            most 30 of them, never longer than ``heartbeat_interval``);
            ``0`` for none: ``heartbeat_interval`` throughout, as the Java client does; or
            ``None`` (default): automatic, 1 s (:data:`LOOPBACK_JOIN_HEARTBEAT`) when every
            master address is a loopback address (127.0.0.0/8, ``::1``, ``localhost``: a
            development cluster), none otherwise (:func:`join_heartbeat_in_effect`; the value
            in effect is :attr:`join_heartbeat`). The master hands out partitions only in
            heartbeat answers, so a new member's first partitions arrive one heartbeat after
            the master's balance cycle: with the local test cluster's 2 s cycle, 1 s brings the
            first message within ~3 s instead of ~13 s. No master setting shortens that wait
            (docs/protocol/consumer.md §2.7).
        heartbeat_max_retries: master heartbeat failures in a row tolerated before the
            consumer backs off (Java ``maxHeartBeatRetryTimes``, 5).
        heartbeat_retry_backoff: seconds between master heartbeats once failures went past
            ``heartbeat_max_retries``, until one succeeds (Java ``heartbeatPeriodAfterFail``,
            60 s).
        register_fail_wait: seconds between two master register attempts at start (Java
            ``regFailWaitPeriodMs``, 1 s).
        subscription_report_interval: heartbeats without a change after which the held
            partitions are reported to the master anyway, in tens for the client-balanced
            consumer (Java ``maxSubInfoReportIntvlTimes``, 6; at least 3).
        close_rebalance_wait: seconds :meth:`Consumer.close` lets a rebalance event in
            progress finish before stopping (Java ``shutDownRebalanceWaitPeriodMs``; 5 s).
        unregister_retry_window: seconds a :class:`Consumer` keeps unregistering a partition
            the master moved away (a :class:`ClientBalancedConsumer`, one it disconnected)
            whose unregister got no answer (timed out: the broker may
            not have run it, and would hold the partition for this consumer, answering the
            group's next holder 410). Each try waits for the previous one's ``rpc_timeout``
            (a late one runs first) and awaits its answer for at most 1 s. Default 35 s, the
            broker's own registration expiry (``consumerRegTimeoutMs`` in the shipped
            ``broker.ini``), after which it has let the registration go anyway; in
            [0, 3600] s, 0 for no retry.
        run_error_rollback: what :meth:`Consumer.run` does with a batch whose handler raised:
            ``True`` (default) rolls it back, so it is delivered again; ``False`` counts it
            consumed and goes on, as Java does by default (``pushListenerThrowedRollBack``).
        tail_check_depth: batch starts (with their message ids) a :class:`Consumer` or
            :class:`ClientBalancedConsumer` remembers per partition it fetches, to find
            messages a restarted broker stored below the group's offset
            (:class:`~tubemq_aio.protocol.tail_check.TailRecord`; 16: the newest batch and
            older ones about 1, 2, 4, ... 2**14 batches back, about 480 bytes a partition); 0
            turns the check off (docs/failures.md).
        tail_check_timeout: seconds the read-back of a partition registered again after its
            broker was lost may take in all (10 s); past it the register counts as failed and
            is tried again like a refused one.
        lost_tail_window: the most messages a broker holds unflushed per store, which must
            match the brokers' ``memCacheMsgCntInK`` × 1024: a store keeps two memory caches
            (one filling, one being flushed) of ``memCacheMsgCntInK`` × 512 messages each.
            ``memCacheMsgCntInK`` is a topic setting (the broker's default where the topic
            sets none), 10 by default, hence the default 10240; a cluster whose topics set 50
            needs 51200. With topics of different settings, take the largest one consumed.
            Larger is safe (more messages come again after a lost tail); smaller can skip
            messages. An int from 0 to 2**32 (``MAX_LOST_TAIL_WINDOW``, more than two caches
            can hold); a bool, a float (``10240.0``, NaN, inf) or anything outside that range
            is a :class:`ConfigError`. When a register finds the group's offset beyond
            the store's end (the broker lost its tail) and this consumer has no record of the
            partition, the group resumes this many messages' offsets below the loaded one
            (never above the end), so the messages stored since the broker came back are
            read, and up to this many read before come again
            (:func:`~tubemq_aio.protocol.tail_check.unrecorded_resume`); 0 resumes at the
            end, skipping them (docs/failures.md).
    """

    group: str
    topics: Mapping[str, frozenset[str]] = field(default_factory=dict)
    consume_from: ConsumeFrom | datetime = "latest"
    msg_time_zone: tzinfo = UTC
    time_search_timeout: float = 60.0
    time_search_concurrency: int = 8
    fetchers: int = 2
    max_prefetch_batches: int = 4
    msg_not_found_wait: float = 0.4
    msg_not_found_max_wait: float | None = None
    confirm_in_local: bool = False
    confirm_timeout: float = 60.0
    rebalance_confirm_wait: float = 3.0
    rebalance_min_interval: float = DEFAULT_EVENT_MIN_INTERVAL
    register_attempts: int = 5
    deliver_corrupt: bool = False
    auto_ack: bool = True
    close_timeout: float = 10.0
    bound: BoundConsume | None = None
    reconnect_delay: float = 0.2
    reconnect_delay_max: float = 5.0
    callback_timeout: float = 10.0
    join_heartbeat_interval: float | None = None
    # ---- the Java client's tuning rows (docs/features.md) ----
    heartbeat_max_retries: int = 5
    heartbeat_retry_backoff: float = 60.0
    register_fail_wait: float = 1.0
    subscription_report_interval: int = 6
    close_rebalance_wait: float = 5.0
    unregister_retry_window: float = 35.0
    run_error_rollback: bool = True
    tail_check_depth: int = DEFAULT_TAIL_CHECK_DEPTH
    tail_check_timeout: float = 10.0
    lost_tail_window: int = DEFAULT_LOST_TAIL_WINDOW

    @property
    def join_heartbeat(self) -> float | None:
        """The join heartbeat interval in effect (seconds), or ``None`` for none:
        ``join_heartbeat_interval`` resolved against the master addresses
        (:func:`join_heartbeat_in_effect`)."""
        return join_heartbeat_in_effect(self.join_heartbeat_interval, self.masters)

    @classmethod
    def from_url(cls, url: str, **overrides: Unpack[ConsumerFields]) -> Self:
        """Build a consumer config from ``tubemq://…`` and keyword fields (which win); see
        :meth:`ClientConfig.from_url`.

        Raises:
            ConfigError: the URL, an option name or an option value is invalid.
        """
        return cls._from_url(url, overrides)

    @classmethod
    def _from_url_parts(cls, checks: Checks, parts: dict[str, Any]) -> dict[str, Any]:
        bound = parts.get("bound")
        if isinstance(bound, BoundParts):
            try:
                parts["bound"] = BoundConsume(
                    bound.session_key, bound.source_count, bound.select_big, bound.offsets
                )
            except ConfigError as exc:
                checks.adopt(exc)
                del parts["bound"]
        return parts

    def _check(self, c: Checks) -> None:
        ClientConfig._check(self, c)
        group = c.text("group", self.group)
        if group is not None:
            try:
                object.__setattr__(self, "group", validate_group_name(group))
            except ConfigError as exc:
                c.adopt(exc)
        try:
            object.__setattr__(self, "topics", normalize_topics(self.topics))
        except ConfigError as exc:
            c.adopt(exc)
        if isinstance(self.consume_from, datetime):
            try:
                require_aware(self.consume_from, "consume_from")
            except ConsumerConfigError as exc:
                c.adopt(exc)
            if self.bound is not None:
                c.adopt(ConsumerConfigError("consume_from=datetime and bound exclude each other"))
        elif not isinstance(self.consume_from, str) or self.consume_from not in CONSUME_FROM:
            c.adopt(
                ConsumerConfigError(
                    f"consume_from must be one of {sorted(CONSUME_FROM)} "
                    f"or an aware datetime, got {self.consume_from!r}"
                )
            )
        c.instance("msg_time_zone", self.msg_time_zone, tzinfo)
        c.seconds("time_search_timeout", self.time_search_timeout, high=86_400.0)
        c.integer("time_search_concurrency", self.time_search_concurrency, low=1, high=1024)
        c.integer("fetchers", self.fetchers, low=1, high=256)
        c.integer("max_prefetch_batches", self.max_prefetch_batches, low=1, high=1 << 16)
        c.seconds("msg_not_found_wait", self.msg_not_found_wait, high=60.0, low_open=False)
        if self.msg_not_found_max_wait is not None:
            c.seconds(
                "msg_not_found_max_wait", self.msg_not_found_max_wait, high=600.0, low_open=False
            )
        c.flag("confirm_in_local", self.confirm_in_local)
        c.seconds("confirm_timeout", self.confirm_timeout, low=1.0, high=3600.0, low_open=False)
        c.seconds("rebalance_confirm_wait", self.rebalance_confirm_wait, high=600.0, low_open=False)
        c.seconds("rebalance_min_interval", self.rebalance_min_interval, high=60.0, low_open=False)
        c.integer("register_attempts", self.register_attempts, low=1, high=1000)
        c.flag("deliver_corrupt", self.deliver_corrupt)
        c.flag("auto_ack", self.auto_ack)
        c.seconds("close_timeout", self.close_timeout)
        c.seconds("reconnect_delay", self.reconnect_delay, high=600.0)
        c.seconds("reconnect_delay_max", self.reconnect_delay_max, high=3600.0)
        c.seconds("callback_timeout", self.callback_timeout, high=3600.0)
        join = self.join_heartbeat_interval
        if not (type(join) in (int, float) and join == JOIN_HEARTBEAT_OFF):
            c.optional_seconds("join_heartbeat_interval", join, high=300.0)
        if c.ok and self.idle_ceiling < self.msg_not_found_wait:
            c.problem(
                f"msg_not_found_max_wait ({self.msg_not_found_max_wait}) must be >= "
                f"msg_not_found_wait ({self.msg_not_found_wait})"
            )
        c.integer("heartbeat_max_retries", self.heartbeat_max_retries, low=0, high=1000)
        c.seconds("heartbeat_retry_backoff", self.heartbeat_retry_backoff, high=3600.0)
        c.seconds("register_fail_wait", self.register_fail_wait, high=600.0, low_open=False)
        c.integer(
            "subscription_report_interval", self.subscription_report_interval, low=3, high=10_000
        )
        c.seconds("close_rebalance_wait", self.close_rebalance_wait, high=600.0, low_open=False)
        c.seconds(
            "unregister_retry_window", self.unregister_retry_window, high=3600.0, low_open=False
        )
        c.flag("run_error_rollback", self.run_error_rollback)
        c.integer("tail_check_depth", self.tail_check_depth, low=0, high=62)
        c.seconds("tail_check_timeout", self.tail_check_timeout, high=3600.0)
        c.integer("lost_tail_window", self.lost_tail_window, low=0, high=MAX_LOST_TAIL_WINDOW)
        if c.ok and self.reconnect_delay_max < self.reconnect_delay:
            c.problem(
                f"reconnect_delay_max ({self.reconnect_delay_max}) must be >= "
                f"reconnect_delay ({self.reconnect_delay})"
            )
        if self.bound is not None:
            if not isinstance(self.bound, BoundConsume):
                c.adopt(BoundConsumeError("bound must be a BoundConsume"))
            elif c.ok:
                for key in self.bound.partition_offsets:
                    if key.topic not in self.topics:
                        c.adopt(BoundConsumeError(f"bound offset for {key}: topic not subscribed"))

    @property
    def idle_ceiling(self) -> float:
        """The longest rest of a partition answering "no new data", in seconds (the
        configured ``msg_not_found_max_wait``, or its default)."""
        if self.msg_not_found_max_wait is not None:
            return self.msg_not_found_max_wait
        return max(MSG_NOT_FOUND_MAX_WAIT, self.msg_not_found_wait)

    @property
    def position(self) -> ConsumePosition:
        """The Java consume position of :attr:`consume_from` (a time: ``earliest``, for the
        partitions its search did not cover)."""
        if isinstance(self.consume_from, datetime):
            return CONSUME_FROM["earliest"]
        return CONSUME_FROM[self.consume_from]

    @property
    def start_time(self) -> datetime | None:
        """:attr:`consume_from` when it is a time, else ``None``."""
        return self.consume_from if isinstance(self.consume_from, datetime) else None

    def filters_of(self, topic: str) -> frozenset[str]:
        """The ``msgType`` filter set of ``topic`` (empty when unfiltered)."""
        return self.topics.get(topic, frozenset())


class ConsumerOptions(ClientOptions, total=False):
    """The :class:`ConsumerConfig` fields a consumer takes as keyword arguments besides
    ``group``, ``topics`` and ``consume_from`` (all optional; validated by the config, an
    unknown one is a ``ConfigError``)."""

    msg_time_zone: tzinfo
    time_search_timeout: float
    time_search_concurrency: int
    fetchers: int
    max_prefetch_batches: int
    msg_not_found_wait: float
    msg_not_found_max_wait: float | None
    confirm_in_local: bool
    confirm_timeout: float
    rebalance_confirm_wait: float
    rebalance_min_interval: float
    register_attempts: int
    deliver_corrupt: bool
    auto_ack: bool
    close_timeout: float
    bound: BoundConsume | None
    reconnect_delay: float
    reconnect_delay_max: float
    callback_timeout: float
    join_heartbeat_interval: float | None
    heartbeat_max_retries: int
    heartbeat_retry_backoff: float
    register_fail_wait: float
    subscription_report_interval: int
    close_rebalance_wait: float
    unregister_retry_window: float
    run_error_rollback: bool
    tail_check_depth: int
    tail_check_timeout: float
    lost_tail_window: int


class ConsumerFields(ConsumerOptions, total=False):
    """Every :class:`ConsumerConfig` field but ``masters`` as keywords (the keywords of
    :meth:`ConsumerConfig.from_url`)."""

    group: str
    topics: TopicsArg
    consume_from: ConsumeFrom | datetime


class ConsumerUrlOptions(ConsumerFields, total=False):
    """The keywords of ``Consumer.from_url``: :class:`ConsumerFields` and the callbacks (all
    optional; the URL gives the masters)."""

    on_assigned: PartitionsCallback | None
    on_revoked: PartitionsCallback | None
