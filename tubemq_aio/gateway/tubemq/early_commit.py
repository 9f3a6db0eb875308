"""A read's CommitOffset written right behind its GetMessage, so that both answers come back
together instead of one broker round trip after the other.

A read that will not gather further batches (``max_messages`` leaves no room after a first batch
like the partition's last one) ends GetMessage → CommitOffset. Its CommitOffset needs nothing
from the GetMessage's answer: the broker commits the batch in flight for the group and partition,
which is the one the GetMessage just read, and answers where the committed cursor now stands,
the batch's end, which nothing else tells (``docs/protocol/consumer.md`` §4.2). So it is written
on the same connection right after the GetMessage, and its answer is taken only when it proves
it committed exactly that read: a success whose offset lies at least one index record per
message of the batch past the batch's start (:func:`commit_covers`). Any other answer (the broker
took the commit before the read and committed nothing, or refused it) is treated as no commit
at all, and the read commits as it would without it. A read that did not go as planned (a 404,
a resync, a refusal, or a batch that turned out to leave room to gather) first waits for the
early commit's answer and ignores it: what it committed is what a CommitOffset after the batch
would have committed, and every later read checks where the broker's cursor stands before it
serves anything. ``docs/gateway.md``, "The consume path".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from tubemq_aio.protocol.call_outcome import ANSWERED
from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE
from tubemq_aio.protocol.consumer_replies import (
    GetMessageResponse,
    OffsetResponse,
    RawMessage,
    payload_bytes,
)

__all__ = ["EarlyCommits", "commit_covers", "get_then_commit", "settle_early"]


class EarlyCommits:
    """Per partition, the size of the first batch of its last read: whether the next read is
    expected to end after its first batch (then its CommitOffset goes out with its GetMessage).

    Args:
        gather_bytes: the byte cap of a gathered answer (a first batch of this many body bytes
            or more leaves no room to gather).
    """

    def __init__(self, gather_bytes: int) -> None:
        self._gather_bytes = gather_bytes
        self._first: dict[str, tuple[int, int]] = {}  # partition key -> (messages, body bytes)

    def expected(self, key: str, max_messages: int) -> bool:
        """Whether a read of ``key`` at ``max_messages`` is expected to end after its first
        batch (False for a partition not read yet)."""
        seen = self._first.get(key)
        if seen is None:
            return False
        count, size = seen
        return 2 * count > max_messages or size >= self._gather_bytes

    def saw(self, key: str, batch: Sequence[RawMessage]) -> None:
        """Note the first batch a read of ``key`` got."""
        self._first[key] = (len(batch), payload_bytes(batch))

    def forget(self, key: str) -> None:
        """Drop what is known of ``key`` (its read failed: the next one asks plainly)."""
        self._first.pop(key, None)


def commit_covers(done: OffsetResponse, begin: int, batch: Sequence[RawMessage]) -> bool:
    """Whether the CommitOffset answer ``done`` committed the batch ``batch`` read at ``begin``:
    it succeeded and the committed offset lies at least one index record per message past
    ``begin`` (a commit the broker took before the read committed nothing: it answers
    ``begin``)."""
    return done.success and done.curr_offset >= begin + INDEX_MSG_UNIT_SIZE * max(1, len(batch))


async def get_then_commit(
    get: Coroutine[Any, Any, GetMessageResponse],
    commit: Callable[[], Coroutine[Any, Any, OffsetResponse]],
) -> tuple[GetMessageResponse, asyncio.Task[OffsetResponse]]:
    """Send ``get`` (a GetMessage without ``lastPackConsumed``), then ``commit()`` right behind
    it; the GetMessage's answer and the CommitOffset still on its way.

    The caller owns the returned task: it awaits it (:func:`settle_early` when it will not use
    the answer). When ``get`` fails or is cancelled, the commit is cancelled and awaited first.
    """
    got = asyncio.ensure_future(get)
    early: asyncio.Task[OffsetResponse] | None = None
    try:
        await asyncio.sleep(0)  # the GetMessage's request is written first
        early = asyncio.ensure_future(commit())
        return await got, early
    except BaseException:
        left = [got] if early is None else [got, early]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        raise


async def settle_early(early: Awaitable[OffsetResponse] | None) -> None:
    """Wait for an early commit whose answer is not used (a refusal, or a commit never sent,
    is ignored: the read goes on as if it had not been sent).

    Raises:
        TubeMQError: the commit ended without an answer (a timeout, a connection lost after
            its write) and may still reach the broker: the read must not go on as if it were
            settled (its caller's lease then lapses, :mod:`.broker_call`).
    """
    if early is not None:
        with contextlib.suppress(*ANSWERED):
            await early
