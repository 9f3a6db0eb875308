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

__all__ = ["MASTER_RETRY", "MasterInvoker", "RpcCaller"]

#: Pauses between rounds over the master list: 0.2 s growing to 2 s (a master election takes
#: seconds; no round is repeated at once, the round itself tried every address).
MASTER_RETRY = RetryPolicy(immediate=0, initial=0.2, maximum=2.0)


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

        The first round tries every master once (from the current one on), each attempt with
        ``timeout``; while no master answered, further rounds follow after a pause until the
        deadline has passed.

        Args:
            method: the master method id.
            body: the serialized request message.
            timeout: seconds of one attempt of the first round, and of the whole call when no
                ``deadline`` is given (default: the invoker's).
            deadline: when to stop starting rounds (the invoker's ``clock``); default
                ``timeout`` from now. A deadline already passed still makes the first round.

        Returns:
            The serialized response message of the master that answered.

        Raises:
            NoMasterServiceError: every master address answered that it has no master
                service (a broker's port given for a master's), at once.
            TubeMQError: the error of the last attempt when no master answered by the deadline
                (when several addresses failed, its text names each one's reason, an address
                without the master service first), or at once any error that another master
                would not fix (for example a malformed request).
        """
        per_attempt = self._timeout if timeout is None else timeout
        if deadline is None:
            deadline = self._clock() + per_attempt
        rounds = 0
        last: TubeMQError | None = None
        not_masters: set[int] = set()  # indexes of the addresses without the master service
        reasons: dict[int, TubeMQError] = {}  # the last error of each address
        while True:
            for _ in range(len(self._masters)):
                if self._index in not_masters:
                    self._index = (self._index + 1) % len(self._masters)
                    continue
                attempt_timeout = per_attempt
                if rounds:  # the retry rounds end by the deadline
                    attempt_timeout = min(per_attempt, deadline - self._clock())
                    if attempt_timeout <= 0.0:
                        break
                try:
                    return await self._rpc.call(
                        self._masters[self._index], method, body, attempt_timeout
                    )
                except NoMasterServiceError as exc:
                    last = NoMasterServiceError(
                        exc.exception_name,
                        exc.remote_message,
                        fatal=exc.fatal,
                        address=str(self._masters[self._index]),
                    )
                    not_masters.add(self._index)
                    reasons[self._index] = last
                    if len(not_masters) == len(self._masters):
                        raise _with_every_reason(last, self._masters, reasons) from None
                    self._index = (self._index + 1) % len(self._masters)
                    self.failovers += 1
                except TubeMQError as exc:
                    if not _should_fail_over(exc):
                        raise
                    last = reasons[self._index] = exc
                    self._index = (self._index + 1) % len(self._masters)
                    self.failovers += 1
            rounds += 1
            assert last is not None
            pause = self._policy.pause(rounds, self._clock(), deadline, self._rand())
            if pause is None:
                raise _with_every_reason(last, self._masters, reasons)
            await self._sleep(pause)


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
