"""Retries bounded by a deadline, not by an attempt count: the one policy every retrying path uses.

A budget of attempts is burnt by failures that come fast (a refused connect costs a millisecond),
so a call given six seconds could give up after a third of one while the cause, for example
every broker restarting at once, was gone a second later. Every retrying path of the client
(sends, consumer register and fetch, client-balanced connect and ``read_at``, master failover,
the gateway's TubeMQ side) therefore asks :class:`RetryPolicy` what to do after a failure:

* retry at once, a few times (``immediate``: another partition or master may answer at once);
* then wait, exponentially longer with each further failure, but never past the deadline;
* and give up only when the deadline has passed.

Pure: no clock, no randomness of its own (``now`` and ``rand`` are handed in), so it is tested
without an event loop (``tests/unit/test_retry_policy.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tubemq_aio.errors import (
    FrameError,
    LocalProtocolError,
    NoMasterServiceError,
    TubeMQError,
)

__all__ = [
    "DEFAULT_RETRY",
    "FETCH_RETRY",
    "REBALANCE_REGISTER_RETRY",
    "REGISTER_RETRY",
    "FailureStreak",
    "RetryPolicy",
    "RetryWindow",
    "register_deadline",
    "register_pause",
    "retry_can_help",
]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a retrying call paces its attempts inside its deadline.

    Attributes:
        immediate: failures in a row retried without a pause (e.g. on another partition); 0 or
            more (default 2, the producer's historic ``send_retries``).
        initial: pause after the first failure past ``immediate``, seconds (default 0.05).
        maximum: longest pause, seconds (default 1.0): a peer that comes back is tried again
            within this.
        multiplier: growth of the pause per further failure (>= 1, default 2.0).
        jitter: fraction of the pause randomised away (0..1, default 0.2), so that many callers
            that failed together do not retry together.
    """

    immediate: int = 2
    initial: float = 0.05
    maximum: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        problems: list[str] = []
        if type(self.immediate) is not int or self.immediate < 0:
            problems.append(f"immediate must be >= 0, not {self.immediate!r}")
        for name in ("initial", "maximum"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                problems.append(f"{name} must be a positive finite number of seconds")
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1.0):
            problems.append("multiplier must be a finite number >= 1")
        if not 0.0 <= self.jitter <= 1.0:
            problems.append("jitter must be within [0, 1]")
        if not problems and self.maximum < self.initial:
            problems.append("maximum must not be smaller than initial")
        if problems:
            raise ValueError("RetryPolicy: " + "; ".join(problems))

    def delay(self, failures: int, rand: float) -> float:
        """The pause after ``failures`` failures in a row, before the deadline is applied.

        Args:
            failures: failures in a row so far (>= 1).
            rand: a uniform random number in [0, 1) for the jitter.

        Returns:
            0.0 while ``failures <= immediate``; then ``base * (1 - jitter * rand)`` seconds with
            ``base = min(maximum, initial * multiplier ** (failures - immediate - 1))``.
        """
        beyond = failures - self.immediate
        if beyond <= 0:
            return 0.0
        base = min(self.maximum, self.initial * self.multiplier ** min(beyond - 1, 64))
        return base * (1.0 - self.jitter * rand)

    def pause(
        self, failures: int, now: float, deadline: float, rand: float, at_least: float = 0.0
    ) -> float | None:
        """How long to wait before the next attempt, or None to give up.

        Args:
            failures: failures in a row so far, the latest included (>= 1).
            now: the current time (any monotonic clock; ``deadline`` on the same one).
            deadline: when the call must have ended.
            rand: a uniform random number in [0, 1) for the jitter.
            at_least: a pause the caller knows is needed anyway (e.g. every broker's reconnect
                backoff), seconds.

        Returns:
            None when the deadline has passed (give up with the last error); else the seconds to
            wait, never past the deadline. A caller that waited until the deadline without a
            new chance gives up then: ``pause`` returns None on its next call.
        """
        remaining = deadline - now
        if not remaining > 0.0:  # NaN-safe
            return None
        wait = max(self.delay(failures, rand), at_least)
        return min(wait, remaining)


#: The policy of the client's retrying paths unless configured otherwise.
DEFAULT_RETRY = RetryPolicy()


#: Master registers at start: the Java client's one pause of 1 s between attempts
#: (``regFailWaitPeriodMs``, docs/protocol/consumer.md §1.3; producers:
#: docs/protocol/wire.md §4).
REGISTER_RETRY = RetryPolicy(immediate=0, initial=1.0, maximum=1.0, multiplier=1.0, jitter=0.0)


#: Broker registers of a rebalance event's partitions: a short first pause (a broker restarting
#: is back within a second or two), growing to the Java client's 1 s between rounds
#: (docs/protocol/consumer.md §2.4 item 3).
REBALANCE_REGISTER_RETRY = RetryPolicy(immediate=0, initial=0.1, maximum=1.0)

#: Fetches of one partition whose broker fails: the pause starts at the 200 ms the fetch loop
#: always rested after a local error (docs/protocol/consumer.md §4.3) and doubles to 3.2 s, so a
#: dead broker costs a few requests a second per fetcher, not five per partition.
FETCH_RETRY = RetryPolicy(immediate=0, initial=0.2, maximum=3.2)


def register_deadline(
    now: float, register_attempts: int, wait: float = REGISTER_RETRY.initial
) -> float:
    """When a register at start stops retrying: the time the Java client's loop of
    ``register_attempts`` attempts ``wait`` seconds apart takes, counted in time rather than
    attempts (fast failures, e.g. every master answering "standby" during an election, no longer
    use it up); ``register_attempts=1`` makes one attempt (one round over the masters).

    Args:
        now: the current time (monotonic).
        register_attempts: the configured attempts (>= 1).
        wait: the pause between two attempts, seconds (the consumer's ``register_fail_wait``,
            Java's ``regFailWaitPeriodMs``; default 1 s).

    Returns:
        ``now + (register_attempts - 1) * wait``.
    """
    return now + max(0, register_attempts - 1) * wait


def retry_can_help(exc: TubeMQError) -> bool:
    """Whether another register attempt may end otherwise than ``exc`` did: False for a
    :class:`~tubemq_aio.errors.FrameError` (the address answered bytes that are not TubeMQ
    frames: a web port given for a master's client port, another service, or a 1.1/1.2 server
    spoken to in the wrong framing), a :class:`~tubemq_aio.errors.NoMasterServiceError` (every
    master address is a TubeMQ node without the master service: a broker's port) and a
    :class:`~tubemq_aio.errors.LocalProtocolError` (the request itself is not allowed): the same
    address answers the same way a second later, so the register fails at once rather than
    after ``register_attempts`` pauses."""
    return not isinstance(exc, FrameError | NoMasterServiceError | LocalProtocolError)


def register_pause(now: float, deadline: float, wait: float) -> float | None:
    """The pause before the next register attempt: ``wait`` seconds, cut at ``deadline``; None
    once the deadline has passed (give up with the last error)."""
    remaining = deadline - now
    if not remaining > 0.0:  # NaN-safe
        return None
    return min(wait, remaining)


class FailureStreak:
    """Failures in a row of calls to one peer, for a back-off after too many.

    Every success that proves the peer healthy resets it, whichever call it was: for a master
    session both a heartbeat and a register (issue 30, fault 2: a streak reset only by a
    heartbeat kept a consumer quiet for a minute after a successful re-register).
    """

    __slots__ = ("count",)

    def __init__(self) -> None:
        #: Failures since the last success.
        self.count = 0

    def __repr__(self) -> str:
        return f"<FailureStreak {self.count}>"

    def failed(self) -> int:
        """Count one more failure; return the streak."""
        self.count += 1
        return self.count

    def succeeded(self) -> None:
        """A call to the peer succeeded: the streak ends."""
        self.count = 0


class RetryWindow:
    """Failures in a row of one retrying path, with the deadline they must end by.

    The deadline is set when the window begins (:meth:`begin`, or the first :meth:`failed`)
    to ``budget`` seconds later; every pause comes from ``policy`` and ends inside it; a
    success (:meth:`succeeded`) ends the window, so the next failure starts a fresh one with
    the whole budget and the shortest pause. Used for the rebalance event's broker registers
    and for the fetches of one partition (issue 30, fault 1: a deadline, not an attempt count).

    Args:
        policy: how the pauses grow.
        budget: seconds from the window's start until giving up (>= 0; 0 gives up at the first
            failure).
    """

    __slots__ = ("budget", "deadline", "failures", "policy")

    def __init__(self, policy: RetryPolicy, budget: float) -> None:
        if not (math.isfinite(budget) and budget >= 0.0):
            raise ValueError(f"RetryWindow: budget must be a finite number >= 0, not {budget!r}")
        self.policy = policy
        self.budget = budget
        #: Failures since the last success.
        self.failures = 0
        #: When the window gives up (monotonic seconds); None while no window is open.
        self.deadline: float | None = None

    def __repr__(self) -> str:
        return f"<RetryWindow failures={self.failures} deadline={self.deadline}>"

    def begin(self, now: float) -> None:
        """Open the window at ``now`` unless one is open already."""
        if self.deadline is None:
            self.deadline = now + self.budget

    def failed(self, now: float, rand: float, at_least: float = 0.0) -> float | None:
        """Count a failure at ``now``; return the pause before the next attempt (seconds,
        ending by the deadline), or None once the deadline has passed (give up).

        Args:
            now: the current time (monotonic seconds).
            rand: a uniform random number in [0, 1) for the policy's jitter.
            at_least: a pause known to be needed anyway (e.g. the connection's back-off).
        """
        self.begin(now)
        assert self.deadline is not None
        self.failures += 1
        return self.policy.pause(self.failures, now, self.deadline, rand, at_least)

    def succeeded(self) -> None:
        """The path worked: close the window (the next failure opens a new one)."""
        self.failures = 0
        self.deadline = None
