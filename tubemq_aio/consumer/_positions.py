"""``positions()`` of a consumer at thousands of partitions: a read-only snapshot made by one
dict copy, whose :class:`PartitionPosition` objects are built when read (issue 34)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from operator import attrgetter

from tubemq_aio.consumer.batch import PartitionPosition
from tubemq_aio.errors import MalformedMetaError
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.partitions import OffsetInfo, PartitionLeases

__all__ = ["Positions", "PositionsView"]

#: ``key -> the position last built for it``, and ``key -> the offsets record it was built
#: from`` (two dicts, not one of pairs: no tuple per partition), one of each per membership.
_Built = tuple[dict[PartitionKey, PartitionPosition], dict[PartitionKey, OffsetInfo]]


def _sorted_keys(keys: Iterable[PartitionKey]) -> list[PartitionKey]:
    """``keys`` in key order (broker id, topic, partition id).

    Three stable sorts by one field each instead of one by a tuple: the sort keys are ints and
    strings, which the garbage collector does not track, so sorting thousands of keys starts
    no collection (8 192 tuples did, walking all of a consumer's objects), and each
    pass is near linear on keys already in order.
    """
    ordered = sorted(keys, key=attrgetter("partition_id"))
    ordered.sort(key=attrgetter("topic"))
    ordered.sort(key=attrgetter("broker_id"))
    return ordered


class _Order:
    """The sorted keys (and their text) of one set of held partitions, made on first need and
    shared by every snapshot taken while that set did not change."""

    __slots__ = ("_index", "_keys", "_texts")

    def __init__(self) -> None:
        self._keys: list[PartitionKey] | None = None
        self._texts: list[str] = []
        self._index: dict[str, PartitionKey] | None = None

    def pairs(self, keys: Mapping[PartitionKey, object]) -> Iterator[tuple[str, PartitionKey]]:
        """``(key text, key)`` of ``keys`` in key order (sorted once per set)."""
        if self._keys is None:
            self._keys = _sorted_keys(keys)
            self._texts = [k.format() for k in self._keys]
            self._index = dict(zip(self._texts, self._keys, strict=True))
        return zip(self._texts, self._keys, strict=True)

    def key_of(self, text: object) -> PartitionKey | None:
        """The key of ``text`` (None when it is no partition key)."""
        if self._index is not None:
            return self._index.get(text) if isinstance(text, str) else None
        if not isinstance(text, str):
            return None
        try:  # one lookup before the set was ever walked: no need to sort it for that
            key = PartitionKey.parse(text)
        except MalformedMetaError:
            return None
        return key if key.format() == text else None  # e.g. "01:t:3" is not a key's text


class Positions(Mapping[str, PartitionPosition]):
    """``partition key text -> PartitionPosition`` of every partition held when
    ``positions()`` was called, iterated in key order (broker id, topic, partition id).

    A read-only snapshot: offsets fetched or committed after the call do not show, and
    neither do partitions added or removed since. Making it copies one dict (C-level, no
    Python-level walk); each position is built when first read (and kept for the next
    snapshot while its offsets do not change), so reading one partition costs one lookup and
    reading all of them is linear. Compares equal to a dict of the same items;
    ``dict(positions)`` makes a plain dict.
    """

    __slots__ = ("_built", "_offsets", "_order")

    def __init__(
        self, offsets: dict[PartitionKey, OffsetInfo], order: _Order, built: _Built
    ) -> None:
        self._offsets = offsets
        self._order = order
        self._built = built

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[str]:
        for text, _ in self._order.pairs(self._offsets):
            yield text

    def __contains__(self, text: object) -> bool:
        key = self._order.key_of(text)
        return key is not None and key in self._offsets

    def __getitem__(self, text: str) -> PartitionPosition:
        key = self._order.key_of(text)
        offsets = None if key is None else self._offsets.get(key)
        if key is None or offsets is None:
            raise KeyError(text)
        return self._position(key, offsets)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def items(self) -> ItemsView[str, PartitionPosition]:
        """The ``(key text, position)`` pairs, in key order."""
        return _Items(self)

    def values(self) -> ValuesView[PartitionPosition]:
        """The positions, in key order."""
        return _Values(self)

    def _walk(self) -> Iterator[tuple[str, PartitionPosition]]:
        # One pass in key order, without a text -> key lookup per item.
        offsets, (built, sources) = self._offsets, self._built
        for text, key in self._order.pairs(offsets):
            record = offsets[key]
            if sources.get(key) is record:
                yield text, built[key]
            else:
                yield text, self._build(text, key, record)

    def _position(self, key: PartitionKey, offsets: OffsetInfo) -> PartitionPosition:
        built, sources = self._built
        if sources.get(key) is offsets:
            return built[key]
        return self._build(key.format(), key, offsets)

    def _build(self, text: str, key: PartitionKey, record: OffsetInfo) -> PartitionPosition:
        # A partition's offsets record is replaced on every update: identity tells.
        built, sources = self._built
        position = built[key] = PartitionPosition.of(text, record)
        sources[key] = record
        return position


class _Items(ItemsView[str, PartitionPosition]):
    _mapping: Positions

    def __iter__(self) -> Iterator[tuple[str, PartitionPosition]]:
        return self._mapping._walk()


class _Values(ValuesView[PartitionPosition]):
    _mapping: Positions

    def __iter__(self) -> Iterator[PartitionPosition]:
        for _, position in self._mapping._walk():
            yield position


class PositionsView:
    """Makes the :class:`Positions` snapshots of the partitions held in ``leases``.

    Cost per call: one copy of the table's offsets dict; the sorted order and the built
    positions are reused until partitions are added or removed (``leases.membership``).
    """

    def __init__(self, leases: PartitionLeases) -> None:
        self._leases = leases
        self._membership = -1
        self._order = _Order()
        self._built: _Built = ({}, {})

    def __call__(self) -> Positions:
        """The positions of every held partition now (see :class:`Positions`)."""
        leases = self._leases
        if leases.membership != self._membership:
            self._membership = leases.membership
            self._order, self._built = _Order(), ({}, {})
        return Positions(leases.offsets(), self._order, self._built)
