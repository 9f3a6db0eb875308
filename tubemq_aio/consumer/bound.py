"""Bound ("effectively-once") consumption: restart a group at exactly the given offsets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tubemq_aio.checks import Checks
from tubemq_aio.errors import BoundConsumeError, MalformedMetaError
from tubemq_aio.protocol.consumer_meta import BoundSession, PartitionKey

__all__ = [
    "BoundConsume",
]

# The wire types of the register fields: sourceCount is an int32, offsets are int64
# (docs/protocol/consumer.md §1.2).
_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class BoundConsume:
    """Bound consumption of one session (master consume type ``CONSUME_BAND``, §1.4).

    Every member of the group passes the same ``session_key`` and ``source_count``; the master
    waits until ``source_count`` members are connected, then hands each requested partition to
    its requester, which starts it at exactly the given offset (first connect of the session
    only). Partitions nobody requested are balanced normally.

    Attributes:
        session_key: identifies one bound session; a new key starts a new session.
        source_count: how many consumers join the session (>= 1).
        select_big: when two members request different offsets for one partition, keep the
            larger (True) or the smaller one.
        offsets: ``"brokerId:topic:partitionId"`` -> index offset to start at (>= 0), e.g.
            ``SendResult.append_offset`` of the first message to consume.

    Raises:
        BoundConsumeError: blank session key, ``source_count < 1``, a malformed partition key
            or a negative / non-integer offset.
    """

    session_key: str
    source_count: int
    select_big: bool = True
    offsets: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        c = Checks("BoundConsume", error=BoundConsumeError)
        key = c.text("session_key", self.session_key)
        if key and "," in key:
            c.problem("session_key must not contain ','")
        if key is not None:
            object.__setattr__(self, "session_key", key)
        c.integer("source_count", self.source_count, low=1, high=_MAX_INT32)
        c.flag("select_big", self.select_big)
        parsed: dict[str, int] = {}
        if c.instance("offsets", self.offsets, Mapping):
            for raw_key, offset in self.offsets.items():
                partition = self._parse_key(c, raw_key)
                value = c.integer(
                    f"offset of {partition or raw_key}", offset, low=0, high=_MAX_INT64
                )
                if partition is None:
                    continue
                text = partition.format()
                if text in parsed:
                    c.problem(f"partition {text} given twice")
                parsed[text] = value
        c.done()
        object.__setattr__(self, "offsets", MappingProxyType(parsed))

    @staticmethod
    def _parse_key(c: Checks, raw_key: object) -> PartitionKey | None:
        if isinstance(raw_key, PartitionKey):
            return raw_key
        if not isinstance(raw_key, str):
            c.problem(f"partition key must be a string, got {raw_key!r}")
            return None
        try:
            return PartitionKey.parse(raw_key.strip())
        except (MalformedMetaError, ValueError) as exc:
            c.problem(
                f"malformed partition key {raw_key!r} (want brokerId:topic:partitionId): {exc}"
            )
            return None

    @property
    def partition_offsets(self) -> dict[PartitionKey, int]:
        """:attr:`offsets` keyed by :class:`PartitionKey`."""
        return {PartitionKey.parse(k): v for k, v in self.offsets.items()}

    def session(self, *, not_allocated: bool) -> BoundSession:
        """The register fields (§1.2 fields 9–13) with the client's allocation belief."""
        return BoundSession(
            session_key=self.session_key,
            source_count=self.source_count,
            select_big=self.select_big,
            offsets=self.partition_offsets,
            not_allocated=not_allocated,
        )
