"""Steps of the client-balanced consumer: resolving a key and positioned reads (``read_at``).

Positioned reads: the broker returns no per-message offsets and reports the end of a batch
only in the answer of a commit. The cheapest sequence that is also deterministic (the same
offset returns the same batch) is register(currOffset) → GetMessage(lastPackConsumed=false) →
commit(true); see ``docs/client-balanced-consumer.md`` for why each step is needed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TypeVar

from tubemq_aio.consumer._cb_models import (
    BatchCodec,
    BatchRead,
    DecodeContext,
    GetMessageAnswer,
    ReadAt,
    parse_key,
)
from tubemq_aio.consumer._cb_session import ClientBalanceSession
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.errors import (
    ConnectError,
    PartitionNotSubscribableError,
    RemoteProtocolError,
    RequestNotSentError,
    RequestTimeoutError,
    UnknownPartitionError,
    server_error,
)
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import Partition, PartitionKey
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, parse_get_message_response
from tubemq_aio.protocol.damage import (
    DamagedRead,
    DamageSignature,
    damage_at_rest,
    damage_signature,
    reread_wait_ms,
)
from tubemq_aio.protocol.retry import DEFAULT_RETRY

__all__ = [
    "MESSAGES",
    "read_batch",
    "resolve_partition",
]

log = logging.getLogger("tubemq_aio.consumer")

A = TypeVar("A", bound=GetMessageAnswer)
T = TypeVar("T")


async def resolve_partition(
    session: ClientBalanceSession, key_text: str, key: PartitionKey | None = None
) -> Partition:
    """The partition of ``key_text`` if it may be connected now
    (docs/protocol/consumer.md §8.4 checks).

    Queries the metadata first when none is held yet. ``key``: ``key_text`` already parsed
    (the caller locked it), else it is parsed here.

    Raises:
        UnknownPartitionError: malformed key, unknown partition or unsubscribed topic (404).
        PartitionNotSubscribableError: not subscribable (422) or refused < 5 s ago (421).
    """
    if key is None:
        key = parse_key(key_text)
    if key.topic not in session.config.topics:
        raise UnknownPartitionError(f"topic {key.topic!r} of {key_text} is not subscribed")
    if not session.cache.metas:
        await session.query_meta()
    code = session.cache.check_connect(key, session.clock())
    if code == 404:
        raise UnknownPartitionError(f"partition {key_text} is not in the topic metadata")
    if code in (421, 422):
        reason = "not subscribable" if code == 422 else "refused by its broker < 5 s ago"
        raise PartitionNotSubscribableError(f"partition {key_text} is {reason} [{code}]")
    return session.cache.metas[key].partition


async def read_batch(
    session: ClientBalanceSession,
    read: ReadAt,
    codec: BatchCodec[A, T],
    *,
    filters: frozenset[str],
    stats: ConsumerStats,
    deliver_corrupt: bool = False,
) -> BatchRead[T]:
    """Read the broker batch starting at ``read.offset``; leaves the group offset after it.

    The answer is parsed and its messages decoded by ``codec`` (:data:`MESSAGES`: into
    :class:`~tubemq_aio.models.Message` objects).

    The partition stays registered as a reader of ``session`` (heartbeated, released on
    disconnect or close). ``read.consume=False`` is a peek: the batch is rolled back instead of
    committed, so the group's offset stays at ``offset`` and ``next_offset`` is unknown
    (returned equal to ``start_offset``).

    ``read.sequential=True`` continues a read of this session that left the group's offset at
    ``offset``: the register is skipped (2 calls instead of 3), because the broker's cursor
    already sits there. Its answer is checked: when the batch does not start at ``offset`` it
    is rolled back, and when it does not or the broker answers anything but a batch (the end
    of the partition included), the read is done again with a register.

    A batch with a checksum mismatch is rolled back and read again (with a register) until two
    reads of its offset show the same damage (damage at rest,
    :func:`~tubemq_aio.protocol.damage.damage_at_rest`; then ``deliver_corrupt`` decides), as
    the fetch path does (``stats.crc_refetches``; docs/protocol/consumer.md §5). Everything is
    bounded by ``rpc_timeout`` from the call, not by a count of reads.

    Raises:
        ConsumeSpeedLimitedError: the broker throttles the group (452); read again later.
        ServerError: the broker refused the register, the read or the commit.
        RemoteProtocolError: the commit committed nothing (a request of this consumer the
            broker ran late dropped the batch); nothing of it counts, read it again.
        RequestTimeoutError: every read until ``rpc_timeout`` had passed brought other damage
            (damage on the way); nothing was consumed, the group's offset is at ``offset``.
    """
    partition, offset, consume = read.partition, read.offset, read.consume
    key = partition.key
    context = DecodeContext(key.topic, key.format(), filters, stats, deliver_corrupt)
    # Every step is redone from the register (which puts the broker's cursor back at
    # ``offset``) when one certainly did not reach the broker: a broker restarting costs time,
    # until ``rpc_timeout`` has passed, not an error in milliseconds (issue 30, fault 1).
    deadline = session.clock() + session.config.rpc_timeout
    damaged: DamagedRead | None = None  # the last read of this call damaged on the way

    async def once(sequential: bool) -> BatchRead[T] | DamagedRead:
        if sequential and key in session.readers:
            got = await _get_message(session, partition, codec)
            if got.success and got.curr_offset == offset:
                return await _finish_read(session, partition, got, codec, context, consume, damaged)
            if got.success:  # the cursor was elsewhere: give the batch back, read with a register
                await session.broker.commit(partition, consumed=False)
        # 1. Register with the bootstrap offset: the first read after a registration uses the
        #    broker's smaller first-read unit, so every read_at gets the same batch boundaries.
        reg = await session.register_at_broker(partition, offset, deadline)
        if not reg.success:
            session.readers.pop(key, None)
            raise server_error(reg.err_code, reg.err_msg)
        session.readers[key] = partition
        # 2. Read without confirming anything: currOffset of the answer is the batch start.
        got = await _get_message(session, partition, codec)
        if not got.success:
            # 404: at the end, an empty read. A 452 (throttled) is not "no data": it is raised
            # (ConsumeSpeedLimitedError), so a range reader never takes it for the end.
            if got.err_code == 404:
                top = got.max_offset if got.max_offset >= 0 else reg.max_offset
                return BatchRead(
                    context.partition_key, codec.empty, reg.curr_offset, reg.curr_offset, top
                )
            raise server_error(got.err_code, got.err_msg)
        return await _finish_read(session, partition, got, codec, context, consume, damaged)

    failures = rereads = 0
    sequential = read.sequential
    while True:
        try:
            done = await once(sequential)
        except (ConnectError, RequestNotSentError):
            failures += 1
            pause = DEFAULT_RETRY.pause(failures, session.clock(), deadline, random.random())
            if pause is None:
                raise
            await asyncio.sleep(pause)
            sequential = False
            continue
        if isinstance(done, BatchRead):
            return done
        # Damage on the way: the batch was rolled back; read it again with a register.
        damaged, rereads, sequential = done, rereads + 1, False
        stats.crc_refetches += 1
        log.warning("checksum mismatch in %s at offset %d: reading the batch again", key, done[0])
        wait = reread_wait_ms(rereads) / 1000
        if session.clock() + wait >= deadline:
            raise RequestTimeoutError(
                f"partition {context.partition_key} at offset {done[0]}: every read within "
                f"rpc_timeout ({session.config.rpc_timeout} s) was damaged on the way "
                f"({rereads} reads); nothing consumed"
            )
        if wait:
            await asyncio.sleep(wait)


async def _get_message(
    session: ClientBalanceSession, partition: Partition, codec: BatchCodec[A, T]
) -> A:
    """GetMessage without confirming anything, parsed by the codec (in place when it can)."""
    whole = codec.parse_whole
    data = await session.broker.get_message_data(
        partition, last_pack_consumed=False, esc_flow_ctrl=False, raw=whole is not None
    )
    return codec.parse(data) if whole is None else whole(data)


async def _finish_read(
    session: ClientBalanceSession,
    partition: Partition,
    got: A,
    codec: BatchCodec[A, T],
    context: DecodeContext,
    consume: bool,
    damaged: DamagedRead | None,
) -> BatchRead[T] | DamagedRead:
    """Decode the batch, then commit it (or roll it back and return its damage when it was
    damaged on the way: ``damaged`` is the last such read of this call)."""
    counters = context.counters
    before = counters.crc_mismatches + counters.decode_errors
    items = codec.decode(got, context)
    # A bit flipped in an attribute block's length counts as undecodable before its checksum
    # is checked: either count sends the batch to the checksum comparison.
    if counters.crc_mismatches + counters.decode_errors != before and codec.damage is not None:
        signature = codec.damage(got)
        if not damage_at_rest(damaged, got.curr_offset, signature):
            # Give the batch back (the group's offset stays at its start); the caller reads
            # it again with a register, so this answer's outcome does not matter.
            await session.broker.commit(partition, consumed=False)
            return got.curr_offset, signature
    # 3. Commit: the only answer that carries the offset right after the batch (a peek rolls
    #    the batch back: the group's offset stays at the register offset).
    done = await session.broker.commit(partition, consumed=consume)
    if not done.success:
        raise server_error(done.err_code, done.err_msg)
    if consume and done.curr_offset <= got.curr_offset:
        # The commit found no batch in flight: a request of this client the broker ran late
        # (a register or an unregister, docs/reliability.md) dropped it, so the offset after
        # the batch is unknown. Reading on from the answer would read the batch again.
        raise RemoteProtocolError(
            f"partition {context.partition_key}: the commit of the batch at offset "
            f"{got.curr_offset} committed nothing (the broker answered {done.curr_offset}); "
            "read it again"
        )
    top = max(done.max_offset, got.max_offset)
    after = done.curr_offset if consume else got.curr_offset
    return BatchRead(context.partition_key, items, got.curr_offset, after, top)


def _decode_messages(got: GetMessageResponse, context: DecodeContext) -> tuple[Message, ...]:
    messages, _ = decode_raw_messages(
        got.messages,
        topic=context.topic,
        partition_key=context.partition_key,
        filters=context.filters,
        counters=context.counters,
        deliver_corrupt=context.deliver_corrupt,
    )
    return tuple(messages)


def _message_damage(got: GetMessageResponse) -> DamageSignature:
    return damage_signature(got.messages)


#: The codec of :meth:`ClientBalancedConsumer.read_at` and friends: one
#: :class:`~tubemq_aio.models.Message` per message (CRC, attribute and filter rules of
#: :func:`~tubemq_aio.consumer._decode.decode_raw_messages`).
MESSAGES: BatchCodec[GetMessageResponse, tuple[Message, ...]] = BatchCodec(
    parse_get_message_response, _decode_messages, (), damage=_message_damage
)
