"""Damage on the way or at rest: whether a read batch with a damaged message is read again.

Used by every reader of messages: the fetch path, the client-balanced consumer's positioned
reads (``read_at`` and friends, the time search, the Spark source) and the gateway's reads.

A message whose checksum does not match was damaged on the way (a read of the same offset
again brings other bytes, or good ones) or at rest in the broker's store (every read brings the
same bytes). Reading again until two reads of the same offset show the same damage tells them
apart without a count of attempts: damage on the way does not repeat itself byte for byte, so no
number of unlucky reads in a row takes it for damage at rest (docs/protocol/consumer.md §5).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import checksum

__all__ = [
    "DAMAGED_REREADS_AT_ONCE",
    "DAMAGED_REREAD_WAIT_MS",
    "DamageSignature",
    "DamagedRead",
    "damage_at_rest",
    "damage_signature",
    "reread_wait_ms",
]

#: ``(message id, checksum received, CRC-32 of the payload received)`` of each message whose
#: checksum does not match, in answer order; empty when every checksum matches.
DamageSignature = tuple[tuple[int, int, int], ...]

#: ``(offset where a read started, its damage signature)``: what the next read of the same
#: offset is compared with.
DamagedRead = tuple[int, DamageSignature]

#: Reads again in a row, each showing other damage, after which each further read of the same
#: damaged offset waits :data:`DAMAGED_REREAD_WAIT_MS` first (a link that damages every answer
#: is not polled in a spin; the reader's own deadline bounds the whole).
DAMAGED_REREADS_AT_ONCE = 3
DAMAGED_REREAD_WAIT_MS = 200


def damage_signature(messages: Iterable[RawMessage]) -> DamageSignature:
    """The damaged messages of one answer, as a value two reads can be compared by."""
    return tuple(
        (m.message_id, m.checksum, zlib.crc32(m.payload))
        for m in messages
        if checksum(m.payload) != m.checksum
    )


def damage_at_rest(previous: DamagedRead | None, offset: int, signature: DamageSignature) -> bool:
    """Whether damage read at ``offset`` is at rest (deliver or drop it) rather than on the way
    (read the batch again).

    Args:
        previous: the offset and signature of this partition's last damaged read, if any.
        offset: where this read started.
        signature: :func:`damage_signature` of this read.

    Returns:
        True when every checksum matched (the damage is an undecodable message stored as it
        is) or the previous damaged read of the same offset showed exactly this damage.
    """
    if not signature:
        return True
    return previous is not None and previous == (offset, signature)


def reread_wait_ms(rereads: int) -> int:
    """The rest (ms) before damaged read number ``rereads`` (1 = the first read again) of one
    offset: 0 for the first :data:`DAMAGED_REREADS_AT_ONCE`, then
    :data:`DAMAGED_REREAD_WAIT_MS`. The reader's deadline, not this count, ends the reading."""
    return 0 if rereads <= DAMAGED_REREADS_AT_ONCE else DAMAGED_REREAD_WAIT_MS
