"""One asyncio lock per key, for calls that must not overlap on the same partition but may on
different ones (the client-balanced consumer's connect, disconnect and positioned reads).

A broker keeps one read cursor per group and partition: a positioned read (register, GetMessage,
commit) of a partition must not interleave with another call on the same partition, while calls
on different partitions share nothing at the broker and run at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["KeyedLocks"]

K = TypeVar("K", bound=Hashable)


class _Slot:
    """A key's lock and how many tasks hold it or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _Hold(Generic[K]):
    """``async with locks.hold(key)``: the lock of ``key`` for the block."""

    __slots__ = ("_key", "_owner", "_slot")

    def __init__(self, owner: KeyedLocks[K], key: K) -> None:
        self._owner = owner
        self._key = key
        self._slot: _Slot | None = None

    async def __aenter__(self) -> None:
        slots = self._owner._slots
        slot = slots.get(self._key)
        if slot is None:
            slot = slots[self._key] = _Slot()
        slot.users += 1
        self._slot = slot
        try:
            await slot.lock.acquire()
        except BaseException:  # cancelled while waiting: no longer a user
            self._leave(slot)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        slot = self._slot
        assert slot is not None
        slot.lock.release()
        self._leave(slot)

    def _leave(self, slot: _Slot) -> None:
        slot.users -= 1
        if slot.users == 0:
            del self._owner._slots[self._key]


class KeyedLocks(Generic[K]):
    """Locks by key, made on first use and dropped when no task holds or waits for them (so
    the table holds only keys in use, whatever the number of keys ever locked).

    Example::

        locks: KeyedLocks[PartitionKey] = KeyedLocks()
        async with locks.hold(key):
            ...  # no other holder of key's lock runs this part now
    """

    def __init__(self) -> None:
        self._slots: dict[K, _Slot] = {}

    def __len__(self) -> int:
        """Keys whose lock is held or waited for now."""
        return len(self._slots)

    def __repr__(self) -> str:
        return f"<KeyedLocks in use={len(self._slots)}>"

    def hold(self, key: K) -> _Hold[K]:
        """An async context manager holding ``key``'s lock for its block (FIFO among the
        tasks waiting for the same key; a task cancelled while waiting leaves the queue)."""
        return _Hold(self, key)

    def locked(self, key: K) -> bool:
        """Whether some task holds ``key``'s lock now."""
        slot = self._slots.get(key)
        return slot is not None and slot.lock.locked()
