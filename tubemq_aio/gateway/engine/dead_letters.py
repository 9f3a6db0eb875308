"""Poison batches: a batch redelivered ``max_redeliveries`` times goes to the group's
``dlq_topic`` the next time a fetch leases it, and the group moves past it.

Opt-in per group (order and zero loss win by default). The diverted messages keep their body,
attributes, type and time, plus ``tgw_src=<partition>@<batch start offset>`` and
``tgw_reason=max_redeliveries``; they are produced while the lease is held, then the lease is
acked. A produce that fails gives the lease back (the batch comes back and is diverted again);
the replica remembers how many messages of the batch it already produced (:class:`DivertProgress`)
and sends only the rest next time, so a poison batch is never lost and each message reaches the
dead-letter topic at most twice on one replica (once more when a send failed with its outcome
unknown); another replica that picks the batch up starts over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.tables import GroupConfig
from tubemq_aio.gateway.engine.data import FetchOutcome
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.producer import Producer

__all__ = ["MAX_DIVERTS", "DeadLetters", "DivertProgress", "fetch_diverting", "is_poison"]

log = logging.getLogger("tubemq_aio.gateway")

#: Poison batches one fetch moves to the dead-letter topic before answering ``empty``.
MAX_DIVERTS = 4


class DivertProgress:
    """Per replica: messages of a poison batch already produced to the dead-letter topic, by
    ``<partition>@<batch start offset>`` (the oldest entries are forgotten beyond ``limit``).
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._sent: dict[str, int] = {}

    def sent(self, source: str) -> int:
        """How many leading messages of the batch ``source`` were produced already."""
        return self._sent.get(source, 0)

    def mark(self, source: str, count: int) -> None:
        """The first ``count`` messages of ``source`` are produced."""
        self._sent.pop(source, None)
        self._sent[source] = count
        while len(self._sent) > self.limit:
            del self._sent[next(iter(self._sent))]

    def forget(self, source: str) -> None:
        """The batch is diverted whole."""
        self._sent.pop(source, None)


@dataclass(slots=True)
class DeadLetters:
    """Where a replica's consume engine sends poison batches (see the module).

    Attributes:
        producer: the replica's producer (None: poison batches are delivered as usual).
        groups: the groups' configurations by name (``max_redeliveries``, ``dlq_topic``).
        timeout: seconds each dead-letter produce may take.
        on_divert: called with the group and the number of messages of each diverted batch
            (the replica's metrics).
        progress: the replica's record of partly diverted batches.
    """

    producer: Producer | None
    groups: Mapping[str, GroupConfig]
    timeout: float
    on_divert: Callable[[str, int], None]
    progress: DivertProgress = field(default_factory=DivertProgress)

    async def fetch(
        self, group: str, engine: ConsumeEngine, fetch: Callable[[], Awaitable[FetchOutcome]]
    ) -> FetchOutcome:
        """``fetch`` with the poison batches of ``group`` diverted (:func:`fetch_diverting`);
        a group without a dead-letter topic fetches as it is."""
        config = self.groups.get(group)
        if self.producer is None or config is None or config.dlq_topic is None:
            return await fetch()
        return await fetch_diverting(
            config,
            engine,
            self.producer,
            fetch,
            lambda count: self.on_divert(group, count),
            self.timeout,
            self.progress,
        )


def is_poison(group: GroupConfig, outcome: FetchOutcome) -> bool:
    """Whether a fetch outcome is a batch already redelivered ``max_redeliveries`` times."""
    lease = outcome.lease
    return (
        group.max_redeliveries > 0
        and group.dlq_topic is not None
        and outcome.status == "ok"
        and lease is not None
        and lease.redelivery > group.max_redeliveries
    )


async def fetch_diverting(
    group: GroupConfig,
    engine: ConsumeEngine,
    producer: Producer | None,
    fetch: Callable[[], Awaitable[FetchOutcome]],
    on_divert: Callable[[int], None],
    timeout: float,
    progress: DivertProgress | None = None,
) -> FetchOutcome:
    """Run ``fetch``; a poison batch is produced to the dead-letter topic, acked, and the fetch
    runs again (at most :data:`MAX_DIVERTS` times, then ``empty``).

    Args:
        group: the group's configuration.
        engine: the consume engine (for the ack).
        producer: the replica's producer (None: poison batches are delivered as usual).
        fetch: one engine fetch.
        on_divert: called with the number of messages of each diverted batch.
        timeout: seconds each dead-letter produce may take.
        progress: the replica's record of partly diverted batches (None: not remembered).
    """
    progress = DivertProgress() if progress is None else progress
    for _ in range(MAX_DIVERTS):
        outcome = await fetch()
        if producer is None or not is_poison(group, outcome):
            return outcome
        lease = outcome.lease
        assert lease is not None
        assert group.dlq_topic is not None
        ref = lease.key
        start = -1 if outcome.position is None else outcome.position.start
        source = f"{lease.partition_key}@{start}"
        try:
            done = progress.sent(source)
            for i, m in enumerate(outcome.messages[done:], start=done + 1):
                attributes = {
                    **m.attributes,
                    "tgw_src": source,
                    "tgw_reason": "max_redeliveries",
                }
                await producer.send(
                    group.dlq_topic,
                    m.body,
                    attributes=attributes,
                    msg_type=m.msg_type or None,
                    msg_time=m.msg_time,
                    timeout=timeout,
                )
                progress.mark(source, i)
        except Exception as exc:  # not diverted: give it back, the next fetch tries again
            log.warning("dead-letter produce of %s failed: %r", source, exc)
            await _release(engine, ref)
            return FetchOutcome("empty", None, (), retry_after_ms=1000)
        except BaseException:
            await _release(engine, ref)
            raise
        progress.forget(source)
        result: str
        try:
            result = await asyncio.shield(engine.settle(ref, "ack"))
        except TubeMQError as exc:  # re-leased or reset meanwhile: it was copied, not skipped
            result = f"not acked: {exc!r}"
        log.warning(
            "group %s: batch %s (%d messages, redelivered %d times) moved to %s (%s)",
            group.spec.name,
            source,
            len(outcome.messages),
            lease.redelivery - 1,
            group.dlq_topic,
            result,
        )
        on_divert(len(outcome.messages))
    return FetchOutcome("empty", None, (), retry_after_ms=0)


async def _release(engine: ConsumeEngine, ref: LeaseKey) -> None:
    with contextlib.suppress(Exception):
        await asyncio.shield(engine.settle(ref, "release"))
