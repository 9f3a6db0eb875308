"""Pure decisions of the transport: reconnect backoff, idle reaping, which errors close a link.

Nothing here touches a socket, the loop or the clock; time comes in as ``now`` (loop time in
seconds) and randomness as ``rand`` so the functions are unit-tested without an event loop.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple

__all__ = [
    "IO_EXCEPTION_NAMES",
    "MAX_SERIAL",
    "MAX_WIRE_TIMEOUT_MS",
    "MIN_ANSWER_FRAME_BYTES",
    "BackoffPolicy",
    "BackoffState",
    "IdleView",
    "after_link_closed",
    "closes_connection",
    "idle_connections",
    "next_serial",
    "read_threshold",
    "record_failure",
    "seconds_until_allowed",
    "wire_timeout_ms",
]


#: serialNo values stay within 31 bits (1..2**31-1): the Java client's counter is a signed int
#: whose positive range is all it reaches before years of uptime (docs/protocol/wire.md §1.5).
MAX_SERIAL = 0x7FFFFFFF

#: Simple class names of the Java exceptions that are ``IOException`` subclasses on the server's
#: side. The Java client closes the connection that delivered such an exception frame (§3.2).
IO_EXCEPTION_NAMES = frozenset(
    {
        "StandbyException",
        "ServerNotReadyException",
        "UnknownProtocolException",
        "InvalidProtocolBufferException",
        "IOException",
        "EOFException",
    }
)


#: Largest ``RequestBody.timeout`` we send: the server reads it as a Java long, and a
#: deadline beyond 24 days means "none" to any real server (2**31 - 1 ms).
MAX_WIRE_TIMEOUT_MS = 0x7FFFFFFF


def wire_timeout_ms(timeout: float) -> int:
    """The ``RequestBody.timeout`` (ms) for a call of ``timeout`` seconds: at least 1 ms, at most
    :data:`MAX_WIRE_TIMEOUT_MS`.

    Args:
        timeout: the call's positive, finite timeout in seconds.

    Returns:
        Whole milliseconds within ``[1, MAX_WIRE_TIMEOUT_MS]``.
    """
    return min(max(1, int(timeout * 1000)), MAX_WIRE_TIMEOUT_MS)


def next_serial(previous: int) -> int:
    """Return the serial number after ``previous``: 1, 2, … MAX_SERIAL, then 1 again.

    Args:
        previous: the last serial used (0 before the first request).

    Returns:
        The next serial number, never 0.
    """
    return previous + 1 if previous < MAX_SERIAL else 1


def closes_connection(exception_name: str) -> bool:
    """Whether an exception frame with this Java class name must close its connection.

    Args:
        exception_name: ``RspExceptionBody.exceptionName`` in any package spelling.

    Returns:
        True for IOException-type names (StandbyException, ServerNotReadyException, …).
    """
    return exception_name.rsplit(".", 1)[-1] in IO_EXCEPTION_NAMES


class BackoffPolicy(NamedTuple):
    """Exponential backoff with jitter for connect attempts to one address.

    Attributes:
        initial: delay after the first failure, seconds.
        maximum: largest delay, seconds.
        multiplier: growth per consecutive failure.
        jitter: fraction of the delay that is randomised away (0 = none, 1 = full jitter).
    """

    initial: float
    maximum: float
    multiplier: float
    jitter: float

    def delay(self, failures: int, rand: float) -> float:
        """Delay before the next attempt after ``failures`` consecutive failures.

        Args:
            failures: consecutive failures so far (>= 1).
            rand: a uniform random number in [0, 1).

        Returns:
            Seconds to wait, in ``[base * (1 - jitter), base]`` with
            ``base = min(maximum, initial * multiplier ** (failures - 1))``.
        """
        exponent = max(0, failures - 1)
        # Cap the exponent so huge failure counts cannot overflow a float.
        base = min(self.maximum, self.initial * self.multiplier ** min(exponent, 64))
        return base * (1.0 - self.jitter * rand)


class BackoffState(NamedTuple):
    """Connect failures of one address.

    Attributes:
        failures: consecutive failed attempts.
        last_failure: loop time of the latest failure.
        next_attempt: loop time before which no new attempt is made.
    """

    failures: int
    last_failure: float
    next_attempt: float


def record_failure(
    state: BackoffState | None, now: float, policy: BackoffPolicy, rand: float
) -> BackoffState:
    """Account for one more failed connect attempt.

    Args:
        state: the address's state, or None when it had no failure since its last success.
        now: loop time of the failure.
        policy: the backoff policy.
        rand: a uniform random number in [0, 1) for the jitter.

    Returns:
        The new state; ``next_attempt`` says when the next try is allowed.
    """
    failures = (state.failures if state is not None else 0) + 1
    return BackoffState(failures, now, now + policy.delay(failures, rand))


def after_link_closed(
    state: BackoffState | None,
    *,
    answered: bool,
    closed_locally: bool,
    now: float,
    policy: BackoffPolicy,
    rand: float,
) -> BackoffState | None:
    """The backoff state of an address after one of its connections closed.

    A peer that accepts a connection and drops it before answering anything (a server that is
    starting, refusing TLS, overloaded) is as unusable as one refusing the connect: without this
    rule every caller reconnects at once, thousands of times a second. So such a link counts as a
    failed attempt. The first one in a row is retried at once (a single reset of a fresh link is
    common and usually transient); from the second on the delays of ``policy`` apply. A link that
    delivered any answer proves the peer works and clears the state; a link we closed ourselves
    (idle reaping, close) changes nothing.

    Args:
        state: the address's state before (None: no failure since the last answer).
        answered: whether the connection ever received a complete frame.
        closed_locally: whether our side closed it.
        now: loop time of the close.
        policy: the backoff policy.
        rand: a uniform random number in [0, 1) for the jitter.

    Returns:
        The new state (None when the address is healthy).
    """
    if answered:
        return None
    if closed_locally:
        return state
    failures = (state.failures if state is not None else 0) + 1
    delay = policy.delay(failures - 1, rand) if failures > 1 else 0.0
    return BackoffState(failures, now, now + delay)


def seconds_until_allowed(state: BackoffState | None, now: float) -> float:
    """How long a new connect attempt must wait.

    Args:
        state: the address's failure state (None: never failed or reset by a success).
        now: current loop time.

    Returns:
        0.0 when an attempt is allowed now, else the seconds until it is.
    """
    if state is None or now >= state.next_attempt:
        return 0.0
    return state.next_attempt - now


class IdleView(NamedTuple):
    """What the reaper needs to know about one connection.

    Attributes:
        key: the pool key of the connection.
        last_activity: loop time of the latest bytes sent or received.
        in_flight: calls awaiting a response.
    """

    key: Hashable
    last_activity: float
    in_flight: int


def idle_connections(views: Iterable[IdleView], now: float, idle_timeout: float) -> list[Hashable]:
    """Choose the connections to close for being idle.

    A connection is idle when it has no call in flight and no traffic for ``idle_timeout``.

    Args:
        views: one view per open connection.
        now: current loop time.
        idle_timeout: seconds without traffic after which a connection is closed.

    Returns:
        The keys of the connections to close, in input order.
    """
    return [v.key for v in views if v.in_flight == 0 and now - v.last_activity >= idle_timeout]


#: The fewest bytes any answer frame takes on the wire: the frame header (begin token, serialNo,
#: block count; docs/protocol/wire.md §1), without a block. Every answer still owed brings at
#: least this many, whatever it says.
MIN_ANSWER_FRAME_BYTES = 12


def read_threshold(outstanding: int, answer_bytes: int, share: float) -> int:
    """How many received bytes a connection's socket should hold before it wakes the reader
    (``SO_RCVLOWAT``), so that one read takes several answers instead of one each.

    A read waits for about ``share`` of the answers still owed, each taken as ``answer_bytes``
    long. By Little's law (answers owed = answer rate × latency) that wait is about ``share``
    of a call's latency, whatever the rate, so 1/32 adds about 3 % to the latency of calls made
    while many are in flight. Waiting for fewer than two answers gains nothing, so it is 1 (off)
    then. It never exceeds :data:`MIN_ANSWER_FRAME_BYTES` per owed answer but one (which may
    have begun in the last read): the answers owed, when they all come, always wake the
    reader. One that never comes (a broker that lost a
    request) is the sweeper's to handle (``Connection.expire`` lowers the threshold first).

    Args:
        outstanding: requests written on the connection and not answered yet (>= 0).
        answer_bytes: the size of an answer frame on this connection (the smallest average
            seen per read); 0 while unknown.
        share: the fraction of the owed answers a read may wait for (0 = off).

    Returns:
        The threshold in bytes, >= 1.
    """
    answers = int(outstanding * share)
    if answers < 2 or answer_bytes <= 0:
        return 1
    # One owed answer may have begun in the last read: only the others are sure to bring
    # MIN_ANSWER_FRAME_BYTES each.
    return max(1, min(answers * answer_bytes, (outstanding - 1) * MIN_ANSWER_FRAME_BYTES))
