"""``async for msg in consumer``: messages one by one on top of batches (style principle 9)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from tubemq_aio.consumer.batch import MessageBatch
from tubemq_aio.errors import ClientClosedError
from tubemq_aio.models import Message

__all__ = ["MessageIterator"]


class GetMany(Protocol):
    """``Consumer.getmany``."""

    def __call__(
        self, *, max_records: int | None = None, timeout: float | None = None
    ) -> Awaitable[MessageBatch]: ...


class MessageIterator:
    """``async for msg in consumer``: a thin layer over ``Consumer.getmany``.

    With ``auto_ack`` a batch is acked when the loop asks for the message after its last one;
    without, fully yielded batches wait for ``Consumer.commit``.
    """

    def __init__(self, getmany: GetMany, *, auto_ack: bool) -> None:
        self._getmany = getmany
        self._auto_ack = auto_ack
        self._batch: MessageBatch | None = None
        self._index = 0
        self.yielded: list[MessageBatch] = []

    def __aiter__(self) -> MessageIterator:
        return self

    async def __anext__(self) -> Message:
        while True:
            batch = self._batch
            if batch is not None:
                if self._index < len(batch):
                    self._index += 1
                    return batch[self._index - 1]
                self._batch = None
                if self._auto_ack:
                    await batch.ack()
                elif batch:
                    self.yielded.append(batch)
            try:
                self._batch = await self._getmany(timeout=None)
            except ClientClosedError:
                raise StopAsyncIteration from None
            self._index = 0

    async def commit(self) -> int:
        """Ack the fully yielded batches (and the current one if fully yielded)."""
        batches, self.yielded = self.yielded, []
        batch = self._batch
        if batch is not None and self._index >= len(batch):
            self._batch = None
            batches.append(batch)
        acked = 0
        for item in batches:
            acked += await item.ack()
        return acked
