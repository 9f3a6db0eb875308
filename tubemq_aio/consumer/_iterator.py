"""``async for msg in consumer``: messages one by one on top of batches (style principle 9).

Each ``async for`` gets an iterator of its own (an async generator), so two loops over one
consumer never share a batch. When a loop ends before its batch is used up (``break``, an
exception, the iterator dropped), the generator's ``finally`` runs (at once for ``aclose()``,
at the next loop iteration when CPython frees a dropped iterator): the yielded messages count
as consumed and the rest of the batch goes back to the consumer, first in line for the next
reader. That is what aiokafka users expect (a yielded message is consumed; the next loop goes
on after it) and nothing waits for ``confirm_timeout``.

``commit()`` right after a ``break`` does that ending itself: CPython drops the iterator at once
(its weak reference dies) but runs its ``aclose()`` only at a later event-loop iteration, so
``commit()`` recognizes such a loop by its dead reference, takes its batch, keeps the yielded
part (acked now) and returns the rest; the generator's ``finally`` then finds nothing to do.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from tubemq_aio.consumer.batch import MessageBatch
from tubemq_aio.errors import ClientClosedError
from tubemq_aio.models import Message

__all__ = ["MessageStream"]


class GetMany(Protocol):
    """``Consumer.getmany``."""

    def __call__(
        self, *, max_records: int | None = None, timeout: float | None = None
    ) -> Awaitable[MessageBatch]: ...


class _Loop:
    """The position of one ``async for``: its batch, how many messages were yielded, and a weak
    reference to its iterator (dead once the loop was left with ``break``)."""

    __slots__ = ("batch", "index", "iterator")

    def __init__(self) -> None:
        self.batch: MessageBatch | None = None
        self.index = 0
        self.iterator: weakref.ref[AsyncIterator[Message]] | None = None

    def ended(self) -> bool:
        """Whether the loop was left (its iterator dropped) and its ``finally`` has not run."""
        return self.iterator is not None and self.iterator() is None


class MessageStream:
    """Message iterators over ``Consumer.getmany``, plus the commit list of ``auto_ack=False``.

    Args:
        getmany: the consumer's ``getmany``.
        auto_ack: ack a batch once all its messages were yielded (else wait for ``commit``).
        closed: whether the consumer's ``close()`` was called: a loop already running then
            ends quietly, a loop started after it raises :class:`ClientClosedError` (as does
            one on a consumer never started).
    """

    def __init__(self, getmany: GetMany, *, auto_ack: bool, closed: Callable[[], bool]) -> None:
        self._getmany = getmany
        self._auto_ack = auto_ack
        self._closed = closed
        self._loops: set[_Loop] = set()
        #: Fully yielded batches waiting for ``commit()`` (``auto_ack=False``).
        self.yielded: list[MessageBatch] = []

    def iterate(self) -> AsyncIterator[Message]:
        """A new iterator with its own position."""
        loop = _Loop()
        iterator = self._iterate(loop)
        loop.iterator = weakref.ref(iterator)
        return iterator

    async def _iterate(self, loop: _Loop) -> AsyncIterator[Message]:
        if self._closed():  # a new loop over a closed consumer is refused, not silently empty
            raise ClientClosedError("this consumer is closed")
        self._loops.add(loop)
        try:
            while True:
                batch = loop.batch
                if batch is not None:
                    # The hot loop of `async for`: plain tuple indexing, no call per message.
                    messages = batch.messages
                    index = loop.index
                    while index < len(messages):
                        index += 1
                        loop.index = index
                        yield messages[index - 1]
                    if loop.batch is batch:  # else commit() took the fully yielded batch
                        loop.batch = None
                        await self._used(batch)
                try:
                    loop.batch = await self._getmany(timeout=None)
                except ClientClosedError:
                    if self._closed():
                        return
                    raise
                loop.index = 0
        finally:
            self._loops.discard(loop)
            batch, loop.batch = loop.batch, None
            if batch is not None:
                await self._ended_early(batch, loop.index)

    async def _used(self, batch: MessageBatch) -> None:
        """Every message of ``batch`` was yielded."""
        if self._auto_ack:
            await batch.ack()
        elif batch:
            self.yielded.append(batch)

    async def _ended_early(self, batch: MessageBatch, used: int) -> None:
        if used >= len(batch):
            await self._used(batch)
            return
        kept = await batch.give_back(used)
        if kept is not None:
            await self._used(kept)

    async def commit(self) -> int:
        """Ack what the loops yielded: the fully yielded batches (waiting for ``commit`` or a
        loop's current one), and for each loop that was left in the middle of a batch
        (``break``) the part it yielded, handing the rest back first in line. A loop still
        running keeps its unfinished batch. Returns how many batches (or kept parts) were
        acked. A cancelled call leaves what it did not ack yet to the next one."""
        batches, self.yielded = self.yielded, []
        left: list[_Loop] = []
        for loop in list(self._loops):
            batch = loop.batch
            if batch is None:
                continue
            if loop.index >= len(batch):
                loop.batch = None
                batches.append(batch)
            elif loop.ended():  # left with `break`: end it here rather than a moment later
                left.append(loop)
        acked = 0
        try:
            for loop in left:
                # Taken only now: a cancelled commit() leaves the loops it did not reach to
                # their own ending, and one that ended meanwhile has no batch left.
                batch, loop.batch = loop.batch, None
                self._loops.discard(loop)
                kept = None if batch is None else await batch.give_back(loop.index)
                if kept is not None:
                    batches.append(kept)
            for item in batches:
                acked += await item.ack()
        finally:
            # Cancelled midway: what was not acked yet waits for the next commit() (the batch
            # whose ack was cut short settled all the same).
            self.yielded[:0] = [b for b in batches if not b.settled]
        return acked
