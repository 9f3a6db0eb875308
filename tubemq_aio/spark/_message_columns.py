"""The Spark source's decoded broker batch: its kept messages, column by column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from tubemq_aio.consumer.toolkit import NO_ATTRIBUTES
from tubemq_aio.models import Message

__all__ = ["EMPTY", "NO_BLOCK", "AttrInfo", "MessageColumns", "type_mask"]

_Ints = np.ndarray[Any, np.dtype[np.int64]]
_Int32s = np.ndarray[Any, np.dtype[np.int32]]
_Bools = np.ndarray[Any, np.dtype[np.bool_]]
#: ``(attribute, attributes, msg_type, msg_time)`` of an attribute block.
AttrInfo = tuple[str | None, Mapping[str, str], str, datetime | None]
#: The :data:`AttrInfo` of a message without an attribute block.
NO_BLOCK: AttrInfo = (None, NO_ATTRIBUTES, "", None)


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """The kept messages of one broker batch, column by column, in order.

    The attribute blocks of a batch repeat (a producer writes the same one for many messages),
    so the per-message ``msgType``, ``msgTime`` and attributes are kept as an index into a
    table of the distinct blocks' values, which the Arrow build takes row by row in C.

    Attributes:
        message_ids: ``messageId`` per message.
        bodies: the bodies (an Arrow binary array).
        blocks: per message, its entry in ``infos``; None when no message has an attribute
            block (then every one has entry 0).
        infos: ``(attribute, attributes, msg_type, msg_time)`` of the distinct attribute
            blocks; entry 0 is a message without one (``None``, no attributes, ``""``,
            ``None``).
    """

    message_ids: _Ints
    bodies: pa.BinaryArray
    blocks: _Int32s | None
    infos: tuple[AttrInfo, ...] = (NO_BLOCK,)

    def __len__(self) -> int:
        return len(self.message_ids)

    @classmethod
    def of(cls, messages: Sequence[Message]) -> MessageColumns:
        """The columns of decoded messages (tests, and answers already decoded into rows)."""
        ids = np.array([m.message_id for m in messages], dtype=np.int64)
        bodies = pa.array([m.body for m in messages], pa.binary())
        if all(m.attribute is None for m in messages):
            return cls(ids, bodies, None)
        infos = [(m.attribute, m.attributes, m.msg_type, m.msg_time) for m in messages]
        blocks = np.arange(1, len(messages) + 1, dtype=np.int32)
        return cls(ids, bodies, blocks, (NO_BLOCK, *infos))

    def _per_message(self, field: int) -> list[Any] | None:
        if self.blocks is None:
            return None
        table = [info[field] for info in self.infos]
        return [table[i] for i in self.blocks.tolist()]

    @property
    def msg_types(self) -> list[str] | None:
        """``$msgType$`` per message, or None when no message has an attribute block (then
        every one is ``""``)."""
        return self._per_message(2)

    @property
    def msg_times(self) -> list[datetime | None] | None:
        """``$msgTime$`` (naive local time) per message, or None (as for ``msg_types``)."""
        return self._per_message(3)

    @property
    def attributes(self) -> list[Mapping[str, str]] | None:
        """The user attributes per message, or None (as for ``msg_types``)."""
        return self._per_message(1)

    def of_types(self, types: frozenset[str]) -> _Bools:
        """Per message, whether its ``msgType`` is one of ``types``."""
        return type_mask(self.blocks, self.infos, len(self), types)

    def head(self, count: int) -> MessageColumns:
        """The first ``count`` messages."""
        if count >= len(self):
            return self
        return MessageColumns(
            self.message_ids[:count],
            self.bodies.slice(0, count),
            None if self.blocks is None else self.blocks[:count],
            self.infos,
        )

    def take(self, rows: _Ints) -> MessageColumns:
        """The messages at positions ``rows`` (ascending)."""
        return MessageColumns(
            self.message_ids[rows],
            self.bodies.take(pa.array(rows)),
            None if self.blocks is None else self.blocks[rows],
            self.infos,
        )


def type_mask(
    blocks: _Int32s | None, infos: Sequence[AttrInfo], n: int, types: frozenset[str]
) -> _Bools:
    """Per message (``n``), whether the ``msgType`` of its entry in ``infos`` is in ``types``."""
    table = np.array([info[2] in types for info in infos], dtype=bool)
    if blocks is None:
        return np.full(n, table[0])
    picked: _Bools = table[blocks]
    return picked


_EMPTY_INTS: _Ints = np.zeros(0, dtype=np.int64)
EMPTY = MessageColumns(_EMPTY_INTS, pa.array([], pa.binary()), None)
