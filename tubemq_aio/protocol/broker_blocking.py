"""Automatic blocking of bad brokers on the send path (sans-I/O).

Three of the Java producer's rules (docs/protocol/wire.md §5.11), with its default thresholds:

* **503 rule**: a send answered with errCode 503 blocks that broker for 50 s after the last 503.
* **Low success rate**: every 30 s the brokers' send/success counts since the previous evaluation
  are compared; a broker far below the others is blocked (at most 15 % of the brokers) until an
  evaluation finds its block older than 30 s.
* **Connection failures** (per ``host:port``): more than 5 failed connects within a 60 s window
  forbid the address for 30 min, as long as fewer than ``min(30, round(known * 0.3))`` addresses
  are forbidden; a successful connect lifts it.

The caller records every finished send and asks :meth:`BrokerBlocker.blocked` before routing;
connection outcomes go to :meth:`~BrokerBlocker.record_connect` and
:meth:`~BrokerBlocker.blocked_addresses`. The in-flight limits of §5.11 belong to the I/O layer.
Evaluations run lazily inside :meth:`~BrokerBlocker.record` and :meth:`~BrokerBlocker.blocked`
whenever one is due. All times are float seconds from a monotonic clock, passed in as ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tubemq_aio.checks import Checks

__all__ = ["SERVICE_UNAVAILABLE", "BlockingSnapshot", "BrokerBlocker", "BrokerBlockingConfig"]

#: The broker's "write service unavailable" error code.
SERVICE_UNAVAILABLE = 503


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerBlockingConfig:
    """Thresholds of the broker blocking rules; defaults are the Java client's.

    Attributes:
        evaluation_interval: seconds between success-rate evaluations
            (``maxForbiddenCheckDuration`` = 30 000 ms).
        block_duration: an evaluation lifts a block older than this many seconds (Java reuses
            ``maxForbiddenCheckDuration``, 30 s).
        max_blocked_ratio: at most ``round(brokers * ratio)`` brokers may be blocked by the
            success-rate rule (``maxSentForbiddenRate`` = 0.15).
        threshold_ratio: a broker is a candidate when its successes are below this fraction of
            the (trimmed) average successes of the others (0.2).
        min_success_ratio: ... and below this fraction of its own sends (0.1) ...
        min_expected_successes: ... and ``floor(sends * min_success_ratio)`` exceeds this (2),
            so quiet brokers are never blocked.
        unavailable_duration: seconds a 503 answer blocks a broker (``unAvailableFbdDurationMs``
            = 50 000 ms).
        enabled: switch the success-rate rule off (the 503 rule always applies).
        link_window: seconds of the connect-failure counting window (``linkStatsDurationMs``
            = 60 000 ms); a failure after the window restarts the count.
        link_max_failures: failures tolerated within a window (``linkStatsMaxAllowedFailTimes``
            = 5); the next one forbids the address.
        link_block_duration: seconds an address stays forbidden
            (``linkStatsForbiddenDurationMs`` = 1 800 000 ms).
        link_max_blocked_ratio: share of known addresses that may be forbidden at once
            (``linkStatsMaxForbiddenRate`` = 0.3).
        link_max_blocked: absolute cap on forbidden addresses (30).
    """

    evaluation_interval: float = 30.0
    block_duration: float = 30.0
    max_blocked_ratio: float = 0.15
    threshold_ratio: float = 0.2
    min_success_ratio: float = 0.1
    min_expected_successes: int = 2
    unavailable_duration: float = 50.0
    enabled: bool = True
    link_window: float = 60.0
    link_max_failures: int = 5
    link_block_duration: float = 1800.0
    link_max_blocked_ratio: float = 0.3
    link_max_blocked: int = 30

    def __post_init__(self) -> None:
        c = Checks("BrokerBlockingConfig")
        c.seconds("evaluation_interval", self.evaluation_interval)
        c.seconds("link_window", self.link_window)
        for name in ("block_duration", "unavailable_duration", "link_block_duration"):
            c.seconds(name, getattr(self, name), low_open=False)
        for name in (
            "max_blocked_ratio",
            "threshold_ratio",
            "min_success_ratio",
            "link_max_blocked_ratio",
        ):
            c.number(name, getattr(self, name), low=0.0, high=1.0)
        for name in ("min_expected_successes", "link_max_failures", "link_max_blocked"):
            c.integer(name, getattr(self, name), low=0)
        c.flag("enabled", self.enabled)
        c.done()


@dataclass(frozen=True, slots=True)
class BlockingSnapshot:
    """A metrics view of the blocker.

    Attributes:
        low_success: brokers blocked by the success-rate rule -> time they were blocked.
        unavailable: brokers blocked by a 503 -> time the block ends.
        window: per broker ``(sends, successes)`` counted since the last evaluation.
        last_evaluation: time of the last evaluation (start of the current window).
        forbidden_addresses: ``host:port`` forbidden after connect failures -> time forbidden.
        connect_failures: per known address, failures in its current window.
    """

    low_success: dict[int, float]
    unavailable: dict[int, float]
    window: dict[int, tuple[int, int]]
    last_evaluation: float | None
    forbidden_addresses: dict[str, float]
    connect_failures: dict[str, int]


class BrokerBlocker:
    """The bad-broker state machine.

    The producer's ``FastAttempt`` reads ``_evaluation_due``, ``_cache_valid_until`` and
    ``_cached`` and counts a plain success in ``_window`` itself when ``_unavailable`` and
    ``_failing_links`` are empty (what :meth:`record` and :meth:`blocked` do then): a change
    to what these fields mean changes it too (its tests compare it with these methods).

    Args:
        config: thresholds; Java defaults when omitted.
    """

    __slots__ = (
        "_cache_valid_until",
        "_cached",
        "_evaluation_due",
        "_failing_links",
        "_forbidden",
        "_last_evaluation",
        "_links",
        "_low_success",
        "_unavailable",
        "_window",
        "config",
    )

    def __init__(self, config: BrokerBlockingConfig | None = None) -> None:
        self.config = config if config is not None else BrokerBlockingConfig()
        # broker id -> [sends, successes] since the last evaluation; brokers stay listed with
        # zero counts after an evaluation, as in Java (they take part in the ranking).
        self._window: dict[int, list[int]] = {}
        self._low_success: dict[int, float] = {}
        self._unavailable: dict[int, float] = {}
        self._last_evaluation: float | None = None
        # When _maybe_evaluate has something to do (-inf: at the first call); the per-send
        # record() compares against it instead of calling _maybe_evaluate every time.
        self._evaluation_due = float("-inf")
        self._cached: frozenset[int] = frozenset()
        self._cache_valid_until = float("-inf")
        # host:port -> [failures in window, window start]; host:port -> time forbidden.
        self._links: dict[str, list[float]] = {}
        self._forbidden: dict[str, float] = {}
        # broker id -> its host:port, for the brokers whose connects failed since their last
        # success: a send the broker answers proves the link works, as a connect does.
        self._failing_links: dict[int, str] = {}

    def __repr__(self) -> str:
        return (
            f"<BrokerBlocker low_success={sorted(self._low_success)} "
            f"unavailable={sorted(self._unavailable)} tracked={len(self._window)} "
            f"forbidden_addresses={sorted(self._forbidden)}>"
        )

    def record(self, broker_id: int, ok: bool, now: float, *, err_code: int | None = None) -> None:
        """Record one finished send attempt.

        Args:
            broker_id: the broker sent to.
            ok: True for a successful response; False for a business error, timeout or
                connection failure.
            now: monotonic time in seconds.
            err_code: the response's error code, if there was a response; 503 blocks the broker
                for ``unavailable_duration``, and a successful response lifts that block (the
                broker's service is available again).
        """
        if now >= self._evaluation_due:
            self._maybe_evaluate(now)
        counts = self._window.get(broker_id)
        if counts is None:
            counts = self._window[broker_id] = [0, 0]
        counts[0] += 1
        if ok:
            counts[1] += 1
            if self._unavailable and self._unavailable.pop(broker_id, None) is not None:
                self._cache_valid_until = float("-inf")
            if self._failing_links and (address := self._failing_links.get(broker_id)):
                self.record_connect(address, True, now, broker_id=broker_id)
        if err_code == SERVICE_UNAVAILABLE:
            self._unavailable[broker_id] = now + self.config.unavailable_duration
            self._cache_valid_until = float("-inf")

    @property
    def last_blocked(self) -> frozenset[int]:
        """The brokers blocked at the last :meth:`blocked` call (a plain read, no evaluation,
        so metric exporters may call it from their own thread)."""
        return self._cached

    def blocked(self, now: float) -> frozenset[int]:
        """Ids of the brokers not to send to at ``now`` (seconds)."""
        if now >= self._evaluation_due:
            self._maybe_evaluate(now)
        if now < self._cache_valid_until:
            return self._cached
        for broker_id in [b for b, until in self._unavailable.items() if until <= now]:
            del self._unavailable[broker_id]
        self._cached = frozenset(self._low_success).union(self._unavailable)
        self._cache_valid_until = min(self._unavailable.values(), default=float("inf"))
        return self._cached

    def forget(self, broker_id: int) -> None:
        """Drop all state of a broker that left the cluster."""
        self._window.pop(broker_id, None)
        self._low_success.pop(broker_id, None)
        self._unavailable.pop(broker_id, None)
        self._failing_links.pop(broker_id, None)
        self._cache_valid_until = float("-inf")

    def snapshot(self) -> BlockingSnapshot:
        """A copy of the current state for metrics and ``repr``."""
        return BlockingSnapshot(
            low_success=dict(self._low_success),
            unavailable=dict(self._unavailable),
            window={b: (c[0], c[1]) for b, c in self._window.items()},
            last_evaluation=self._last_evaluation,
            forbidden_addresses=dict(self._forbidden),
            connect_failures={a: int(s[0]) for a, s in self._links.items()},
        )

    def record_connect(
        self, address: str, ok: bool, now: float, *, broker_id: int | None = None
    ) -> None:
        """Record the outcome of a connection attempt to ``host:port``.

        A success (Java also counts a send handed to the connection, or any response to a sync
        send) lifts a forbidden address and restarts its window. A failure is counted; the one
        after ``link_max_failures`` in a window forbids the address unless the cap on forbidden
        addresses is reached (``RpcServiceFactory.addRmtAddrErrCount``).

        Args:
            address: ``host:port`` of the broker.
            ok: whether the connection was established.
            now: monotonic time in seconds.
            broker_id: the broker at ``address``, if known: a later successful send to it
                (:meth:`record`) then counts as a success of the link too.
        """
        cfg = self.config
        stats = self._links.get(address)
        if stats is None:
            stats = self._links[address] = [0, now]
        if ok:
            self._forbidden.pop(address, None)
            stats[0], stats[1] = 0, now
            if broker_id is not None:
                self._failing_links.pop(broker_id, None)
            return
        if broker_id is not None:
            self._failing_links[broker_id] = address
        if now - stats[1] > cfg.link_window:
            stats[0], stats[1] = 0, now
        stats[0] += 1
        if stats[0] <= cfg.link_max_failures:
            return
        if address in self._forbidden:
            self._forbidden[address] = now
            return
        self._expire_forbidden(now)
        allowed = min(round(len(self._links) * cfg.link_max_blocked_ratio), cfg.link_max_blocked)
        if allowed > len(self._forbidden):
            self._forbidden[address] = now

    def blocked_addresses(self, now: float) -> frozenset[str]:
        """``host:port`` addresses not to connect to at ``now`` (seconds)."""
        if not self._forbidden:
            return frozenset()
        self._expire_forbidden(now)
        return frozenset(self._forbidden)

    def _expire_forbidden(self, now: float) -> None:
        limit = self.config.link_block_duration
        for address in [a for a, t in self._forbidden.items() if now - t > limit]:
            del self._forbidden[address]

    def _maybe_evaluate(self, now: float) -> None:
        if self._last_evaluation is None:
            self._last_evaluation = now
        elif now - self._last_evaluation >= self.config.evaluation_interval:
            self._evaluate(now)
        self._evaluation_due = self._last_evaluation + self.config.evaluation_interval

    def _evaluate(self, now: float) -> None:
        """One success-rate evaluation (``statisticDltBrokerStatus``)."""
        cfg = self.config
        self._last_evaluation = now
        self._cache_valid_until = float("-inf")
        # 1. Deltas of the brokers not blocked; every window restarts.
        deltas = [
            (counts[1], broker_id, counts[0])
            for broker_id, counts in self._window.items()
            if broker_id not in self._low_success
        ]
        for counts in self._window.values():
            counts[0] = counts[1] = 0
        # 2. Lift blocks older than block_duration.
        for broker_id in [b for b, t in self._low_success.items() if now - t > cfg.block_duration]:
            del self._low_success[broker_id]
        if not deltas or not cfg.enabled:
            return
        # 3. How many more may be blocked. Java's Math.rint and Python's round() both round half
        #    to even; with nothing blocked at least 4 brokers are needed for hold > 0.
        n = len(deltas)
        already = len(self._low_success)
        hold = round((n + already) * cfg.max_blocked_ratio) - already
        if hold <= 0:
            return
        # 4. Threshold from the successes without the extremes (integer division, then * ratio).
        deltas.sort()  # by successes ascending; broker id breaks ties deterministically
        total = sum(d[0] for d in deltas)
        if n <= 3:
            if n == 1:
                return
            threshold = int((total - deltas[0][0]) // (n - 1) * cfg.threshold_ratio)
        else:
            trimmed = total - deltas[0][0] - deltas[1][0] - deltas[-1][0]
            threshold = int(trimmed // (n - 3) * cfg.threshold_ratio)
        # 5. Walk up from the worst broker.
        newly: list[int] = []
        for successes, broker_id, sends in deltas:
            expected = int(sends * cfg.min_success_ratio)
            if (
                successes < threshold
                and expected > cfg.min_expected_successes
                and successes < expected
            ):
                newly.append(broker_id)
            if len(newly) >= hold or successes >= threshold:
                break
        for broker_id in newly:
            self._low_success[broker_id] = now
