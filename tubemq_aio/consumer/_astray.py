"""Broker calls of one consumer that ended without an answer but may still run at the broker,
per partition, and the rest they impose on the partition's next calls.

A register (with an offset: it sets the group's cursor), an unregister (it may commit the
batch in flight), a GetMessage (with the commit flag it commits the batch in flight) and a
CommitOffset all move the group's cursor of one partition, and the broker runs a request
whenever it gets to it, even after its client gave up on it or registered again
(:func:`~tubemq_aio.protocol.call_outcome.may_still_arrive`, docs/reliability.md, "A request
the broker runs late"). So after such a call the consumer sends nothing more of that partition
until the call had ``rpc_timeout`` more: a late request that runs by then is followed, not
preceded, by the calls that decide where the group reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from tubemq_aio.errors import ClientClosedError
from tubemq_aio.protocol.call_outcome import may_still_arrive
from tubemq_aio.protocol.consumer_meta import PartitionKey

__all__ = ["AstrayCalls"]

log = logging.getLogger("tubemq_aio.consumer")


class AstrayCalls:
    """Until when a call of each partition may still run at its broker.

    The one record of such calls: :class:`~tubemq_aio.consumer._broker.BrokerRpc` notes every
    call of a partition that ends without an answer, and its calls and the fetch engine ask
    :meth:`rest` before the partition's next ones.

    Args:
        timeout: seconds the broker may still run a call after its caller gave up on it (the
            consumer's ``rpc_timeout``: it had that long already while the call waited).
        on_late: called once for each call noted as astray, unless it was cancelled (the
            consumer counts it in ``stats.late_request_waits``).
        clock: monotonic seconds (:func:`time.monotonic`, the event loop's clock).
    """

    __slots__ = ("_any", "_clock", "_closed", "_on_late", "_registrations", "_timeout")

    def __init__(
        self,
        timeout: float,
        *,
        on_late: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timeout = timeout
        self._on_late = on_late
        self._clock = clock
        self._any: dict[PartitionKey, float] = {}
        self._registrations: dict[PartitionKey, float] = {}
        self._closed = asyncio.Event()

    def note(self, key: PartitionKey, error: BaseException, *, registration: bool) -> None:
        """A call of ``key`` (a register or unregister with ``registration``, else a
        GetMessage or CommitOffset) ended with ``error``: if it may still reach the broker,
        the partition's next calls wait ``timeout`` from now."""
        if not may_still_arrive(error):
            return
        until = self._clock() + self._timeout
        _later(self._any, key, until)
        if registration:
            _later(self._registrations, key, until)
        # A call cut short by our own cancel (mostly a consumer closing) rests its partition
        # too, but is not a broker or network failing.
        if self._on_late is not None and not isinstance(error, asyncio.CancelledError):
            self._on_late()

    def rest(self, key: PartitionKey, *, registrations_only: bool = False) -> float:
        """Seconds until no call of ``key`` noted astray may still run (only its registers and
        unregisters with ``registrations_only``); 0.0 when none may."""
        table = self._registrations if registrations_only else self._any
        until = table.get(key)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del table[key]
            return 0.0
        return left

    async def settle(self, key: PartitionKey, *, registrations_only: bool = False) -> None:
        """Wait out :meth:`rest` of ``key``.

        Raises:
            ClientClosedError: the consumer closed (:meth:`close`) before the rest ended.
        """
        left = self.rest(key, registrations_only=registrations_only)
        if left <= 0:
            return
        if not self._closed.is_set():
            log.info("%s: waiting %.1f s for a call that may still run at the broker", key, left)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._closed.wait()
        if self._closed.is_set():
            raise ClientClosedError(
                f"the consumer was closed while a call of {key} waited for an earlier one "
                "that may still run at the broker"
            )

    def close(self) -> None:
        """The consumer has closed: a :meth:`settle` under way ends now, and every later one
        that would wait ends at once (an application's ``connect`` or positioned read waiting
        out a rest would only meet the closed connections after it)."""
        self._closed.set()

    def prune(self) -> None:
        """Drop the partitions whose calls can no longer run (the fetch engine calls it when
        partitions leave the consumer: one never asked again is not kept)."""
        now = self._clock()
        for table in (self._any, self._registrations):
            for key in [k for k, until in table.items() if until <= now]:
                del table[key]


def _later(table: dict[PartitionKey, float], key: PartitionKey, until: float) -> None:
    table[key] = max(until, table.get(key, until))
