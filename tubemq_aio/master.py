"""Calls to the active TubeMQ master, failing over along the configured address list.

Only one master is active at a time; the others answer every call with a ``StandbyException``.
Like the Java client (docs/protocol/wire.md §9), a call goes to the current master and, when that
master is a standby, unreachable, or does not answer in time, moves on to the next address and tries
again. The client then stays on the master that answered.

An address whose answer says it has no master service (a broker's client port given for a
master's: :class:`~tubemq_aio.errors.NoMasterServiceError`) is not asked again within the call,
and once every address answered so the call fails at once, naming the address and the
master's default port, instead of retrying until its deadline. A call that fails at several
addresses names each one's reason in its error, an address without the master service first.

During a failover every master may answer "standby" for a while (the election), and a restarting
master refuses connects: a call that went once round every address without an answer therefore
goes round again after a pause (:class:`~tubemq_aio.protocol.retry.RetryPolicy`), until its
deadline, instead of failing in the milliseconds such answers take (issue 30, fault 1).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from tubemq_aio.checks import Checks
from tubemq_aio.config import HostPort
from tubemq_aio.errors import (
    NetworkError,
    NoMasterServiceError,
    RemoteRpcError,
    RequestTimeoutError,
    TubeMQError,
)
from tubemq_aio.protocol.retry import RetryPolicy
from tubemq_aio.protocol.rpc import Method

__all__ = ["MASTER_RETRY", "MASTER_STAGGER", "MasterInvoker", "RpcCaller"]

#: Pauses between rounds over the master list: 0.2 s growing to 2 s (a master election takes
#: seconds; no round is repeated at once, the round itself tried every address).
MASTER_RETRY = RetryPolicy(immediate=0, initial=0.2, maximum=2.0)

#: Seconds a round waits for a silent master before it also asks the next address (like Happy
#: Eyeballs, RFC 8305): a master answers in milliseconds, so a silent one (accepted the
#: connection, never answers: frozen, half-dead) costs this, not the call's whole time.
MASTER_STAGGER = 0.5

#: Seconds an attempt may run past its round's end before the round abandons it: the transport's
#: own timeout, due at that end, normally ends it first with its own error (which may say why,
#: e.g. a framing mismatch), a sweep or two after it (``sweep_interval``, one more when reads
#: were coalesced) and later on a loaded machine: 0.1 s lost that hint against a real 1.1
#: server in a full CI run. This only bounds a transport that overruns its timeout.
_OVERDUE = 1.0


class RpcCaller(Protocol):
    """The one transport operation master calls need (:class:`~tubemq_aio._io.rpc_client.RpcClient`
    in production, a fake in unit tests)."""

    async def call(self, addr: HostPort, method: Method, body: bytes, timeout: float) -> bytes:
        """Send the serialized request ``body`` to ``addr``; return the response bytes."""
        ...


def _should_fail_over(exc: TubeMQError) -> bool:
    if isinstance(exc, NetworkError | RequestTimeoutError):
        return True
    return isinstance(exc, RemoteRpcError) and exc.retriable


class MasterInvoker:
    """Sends master RPCs to the active master of a cluster.

    Args:
        rpc: the transport used for each attempt.
        masters: the master addresses, tried in this order.
        timeout: default timeout of a call in seconds: its first round over the masters gives
            each attempt this long, and further rounds are made until it has passed.
        policy: the pauses between rounds (default :data:`MASTER_RETRY`).
        clock: monotonic seconds (tests pass a fake one, with ``sleep``).
        sleep: waits between rounds.
        rand: uniform [0, 1) numbers for the pauses' jitter.
    """

    def __init__(
        self,
        rpc: RpcCaller,
        masters: Sequence[HostPort],
        timeout: float,
        *,
        policy: RetryPolicy = MASTER_RETRY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        checks = Checks("MasterInvoker")
        if not masters:
            checks.problem("at least one master address is required")
        checks.done()
        self._rpc = rpc
        self._masters = tuple(masters)
        self._index = 0
        self._timeout = timeout
        self._policy = policy
        self._clock = clock
        self._sleep = sleep
        self._rand = rand
        self.failovers = 0

    def __repr__(self) -> str:
        return f"<MasterInvoker current={self.current} masters={len(self._masters)}>"

    @property
    def current(self) -> HostPort:
        """The master the next call goes to first."""
        return self._masters[self._index]

    @property
    def masters(self) -> tuple[HostPort, ...]:
        """All configured master addresses."""
        return self._masters

    async def call(
        self,
        method: Method,
        body: bytes,
        *,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """Send one master RPC, failing over to the next master on standby or network errors.

        The call as a whole ends by ``max(deadline, start + timeout)``: without a ``deadline``
        (heartbeats, metadata) within ``timeout``, however many masters are silent. A round
        tries every master once, from the current one on, staggered: the next address is asked
        :data:`MASTER_STAGGER` seconds after the previous one while that one is still silent
        (sooner when the round's time split over its addresses is shorter), or at once when it
        answered with an error; a late answer of an earlier address still counts, the first one
        wins and the other attempts are cancelled. While no master answered, further rounds
        follow after a pause until the deadline has passed.

        Args:
            method: the master method id.
            body: the serialized request message.
            timeout: seconds one attempt may take at most, and the bound of the whole call when
                no later ``deadline`` is given (default: the invoker's).
            deadline: when to stop starting rounds (the invoker's ``clock``); default
                ``timeout`` from now. A deadline already passed still makes the first round,
                within ``timeout`` from now.

        Returns:
            The serialized response message of the master that answered.

        Raises:
            NoMasterServiceError: every master address answered that it has no master
                service (a broker's port given for a master's), at once.
            TubeMQError: the error of the last attempt when no master answered by the deadline
                (:class:`~tubemq_aio.errors.RequestTimeoutError` for an address still silent
                when the call's time ran out; when several addresses failed, its text names
                each one's reason, an address without the master service first), or at once any
                error that another master would not fix (for example a malformed request).
        """
        per_attempt = self._timeout if timeout is None else timeout
        now = self._clock()
        if deadline is None:
            deadline = now + per_attempt
        failures = _Failures(self._masters)
        round_end = max(deadline, now + per_attempt)  # the first round is always made
        rounds = 0
        while True:
            answer = await self._round(method, body, per_attempt, round_end, failures)
            if answer is not None:
                return answer
            rounds += 1
            pause = self._policy.pause(rounds, self._clock(), deadline, self._rand())
            if pause is None:
                raise failures.error()
            await self._sleep(pause)
            round_end = deadline

    async def _round(
        self, method: Method, body: bytes, per_attempt: float, end: float, failures: _Failures
    ) -> bytes | None:
        """One staggered round over the addresses not known to lack the master service, ending
        by ``end`` (:attr:`_clock` time); None when none answered."""
        n = len(self._masters)
        order = [
            (self._index + k) % n
            for k in range(n)
            if (self._index + k) % n not in failures.not_masters
        ]
        order.reverse()  # popped from the end
        stagger = min(MASTER_STAGGER, (end - self._clock()) / max(1, len(order)))
        pending: dict[asyncio.Task[bytes], int] = {}
        start_next = True
        try:
            while True:
                left = end - self._clock()
                if start_next and order and min(per_attempt, left) > 0.0:
                    index = order.pop()
                    attempt = self._rpc.call(
                        self._masters[index], method, body, min(per_attempt, left)
                    )
                    pending[asyncio.ensure_future(attempt)] = index
                    start_next = False
                if not pending:
                    return None
                staggering = bool(order) and stagger < left
                wait = stagger if staggering else left + _OVERDUE
                done, _ = await asyncio.wait(
                    pending, timeout=max(0.0, wait), return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    if staggering:
                        start_next = True  # the earlier attempts stay: a late answer counts
                        continue
                    for index in pending.values():  # the round's time is up
                        silent = f"master {self._masters[index]} did not answer in time"
                        failures.add(index, RequestTimeoutError(silent))
                    self.failovers += len(pending)
                    return None
                for task in done:
                    index = pending.pop(task)
                    exc = task.exception()
                    if exc is None:
                        self._index = index
                        self.failovers += len(pending)  # overtaken by this answer
                        return task.result()
                    if not isinstance(exc, TubeMQError):
                        raise exc
                    failures.add(index, exc)  # raises when no master can help
                    self.failovers += 1
                    start_next = True
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


class _Failures:
    """Why each address failed within one call (the last reason of each), and which addresses
    answered that they have no master service."""

    def __init__(self, masters: Sequence[HostPort]) -> None:
        self.masters = masters
        self.reasons: dict[int, TubeMQError] = {}
        self.not_masters: set[int] = set()
        self.last: TubeMQError | None = None

    def add(self, index: int, exc: TubeMQError) -> None:
        """Record that the address at ``index`` failed with ``exc``.

        Raises:
            TubeMQError: ``exc`` when another master would not fix it; the error naming every
                reason when every address answered that it has no master service.
        """
        if isinstance(exc, NoMasterServiceError):
            exc = NoMasterServiceError(
                exc.exception_name,
                exc.remote_message,
                fatal=exc.fatal,
                address=str(self.masters[index]),
            )
            self.not_masters.add(index)
            self.last = self.reasons[index] = exc
            if len(self.not_masters) == len(self.masters):
                raise self.error() from None
            return
        if not _should_fail_over(exc):
            raise exc
        self.last = self.reasons[index] = exc

    def error(self) -> TubeMQError:
        """The error a call that no master answered raises (a timeout when its time was up
        before any master was asked)."""
        if self.last is None:
            return RequestTimeoutError("the call's time was up before any master was asked")
        return _with_every_reason(self.last, self.masters, self.reasons)


def _with_every_reason(
    last: TubeMQError, masters: Sequence[HostPort], reasons: Mapping[int, TubeMQError]
) -> TubeMQError:
    """``last`` (its type tells the caller what to do), its text naming why each address
    failed (``reasons``: by index in ``masters``), when more than one did: an address that is
    not a master first (the most specific: a broker's port given for a master's), then the
    others in the configured order, each prefixed with its address unless its text names it."""
    if len(reasons) < 2:
        return last
    ordered = sorted(
        ((masters[i], reasons[i]) for i in sorted(reasons)),
        key=lambda r: not isinstance(r[1], NoMasterServiceError),
    )
    texts = [text if str(a) in (text := str(r)) else f"{a}: {text}" for a, r in ordered]
    last.args = (f"no master answered at any of {len(texts)} addresses: {'; '.join(texts)}",)
    return last
