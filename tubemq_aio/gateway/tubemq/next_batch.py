"""The read of a partition's next batch after a fetch's answer (off its critical path), and the
batch it kept served later without a broker call.

The read is a GetMessage without ``lastPackConsumed`` and the CommitOffset written right behind
it on the same connection (:func:`~tubemq_aio.gateway.tubemq.early_commit.get_then_commit`):
the broker reads the batch at the group's committed cursor and commits it, and the commit's
answer tells where the batch ends, so the batch is kept with its end known. It runs under a
read-in-flight mark in Redis whose deadline the caller passes in: when the answers have not
come by then the connection is aborted, so that none of the read's requests is executed by the
broker after the deadline (``docs/gateway.md``, "Read-ahead off the critical path";
``docs/protocol/consumer.md`` §4.2). A batch kept this way is served only while the connection
it was read on is open (a broker restart closes it; the broker may have lost that batch).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Protocol

from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.consumer.toolkit import ClientBalanceSession
from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.tubemq.batch_end import may_continue
from tubemq_aio.gateway.tubemq.early_commit import commit_covers, get_then_commit
from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages, screen_raw_messages
from tubemq_aio.gateway.tubemq.tube_read import TubeRead
from tubemq_aio.protocol.consumer_meta import Partition
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage

__all__ = ["NextBatch", "ReadConnection", "kept_read", "read_next_batch", "screened"]


class ReadConnection(Protocol):
    """The broker connection a batch was read on (the SDK's connection, seen from here)."""

    @property
    def is_closed(self) -> bool:
        """Whether it is closed (a broker restart, an abort, the session's close)."""

    def abort(self) -> None:
        """Close it at once; requests not yet written are dropped."""


@dataclasses.dataclass(frozen=True, slots=True)
class NextBatch:
    """What the read of a partition's next batch gave.

    Attributes:
        got: the GetMessage's answer (None: it did not come before the deadline, or failed).
        done: the CommitOffset's answer (None: as ``got``).
        connection: the broker connection both were sent on (None: none was open).
        aborted: the deadline passed before both answers came; the connection was aborted.
    """

    got: GetMessageResponse | None
    done: OffsetResponse | None
    connection: ReadConnection | None
    aborted: bool = False

    def kept_end(self, start: int) -> int:
        """Where the batch read ends when it is one to keep: the GetMessage started at
        ``start`` (the group's committed cursor was where the booked batch ended) and the
        commit covers it (:func:`commit_covers`); -1 otherwise."""
        got, done = self.got, self.done
        if got is None or done is None or not got.success or got.curr_offset != start:
            return -1
        return done.curr_offset if commit_covers(done, start, got.messages) else -1

    def cursor(self, start: int) -> int:
        """Where the group's broker cursor stands after the read, when the answers say so: the
        kept batch's end, or after a 404 at ``start`` the commit's offset; -1 (unknown)
        otherwise."""
        end = self.kept_end(start)
        if end >= 0:
            return end
        got, done = self.got, self.done
        if got is not None and done is not None and not got.success and got.err_code == 404:
            return done.curr_offset if done.success else -1
        return -1


async def read_next_batch(
    session: ClientBalanceSession, partition: Partition, deadline: float
) -> NextBatch:
    """GetMessage (no ``lastPackConsumed``) and the CommitOffset right behind it on one
    connection, answered before ``deadline`` (``loop.time()``) or the connection aborted.

    Transport errors are answers too (``got``/``done`` None); a cancel aborts the connection
    when the answers have not all come (its requests must not reach the broker later) and is
    raised.
    """
    rpc, broker = session.broker.rpc, partition.broker
    conn: ReadConnection | None = None
    answered = False
    try:
        async with asyncio.timeout_at(deadline):
            conn = await rpc.connect(broker)
            get = session.broker.get_message(
                partition, last_pack_consumed=False, esc_flow_ctrl=False
            )
            got, early = await get_then_commit(
                get, lambda: session.broker.commit(partition, consumed=True)
            )
            done = await early
            answered = True
            return NextBatch(got, done, conn)
    except TimeoutError:
        return NextBatch(None, None, conn, aborted=True)
    except (TubeMQError, OSError):  # a lost connection: the read's answers are unknown
        return NextBatch(None, None, conn)
    finally:
        if not answered and conn is not None:
            conn.abort()


def screened(
    key: str, batch: tuple[RawMessage, ...], filters: frozenset[str], counters: ConsumerStats
) -> tuple[RawMessage, ...] | None:
    """``batch`` screened as a read screens it (:func:`screen_raw_messages`), or None when a
    message was damaged (then it is not kept: a read on the critical path handles damage)."""
    before = counters.crc_mismatches + counters.decode_errors
    kept = screen_raw_messages(batch, partition_key=key, filters=filters, counters=counters)
    return None if counters.crc_mismatches + counters.decode_errors != before else kept


def kept_read(
    key: str, start: int, end: int, top: int, messages: tuple[RawMessage, ...]
) -> TubeRead:
    """The read that serves a kept batch (screened ``messages`` at ``start``, ending at ``end``,
    ``top`` the max offset its answer reported): no broker call (``from_kept``)."""
    topic = key.split(":")[1]
    return TubeRead(
        "ok",
        start,
        end,
        max(top, end),
        FetchedMessages(topic, key, messages),
        rpcs=0,
        batches=1,
        from_kept=True,
        more=may_continue(start, messages, top),
    )
