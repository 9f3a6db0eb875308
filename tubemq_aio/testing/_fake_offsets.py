"""The group offsets of a fake broker, with the recent changes a SIGKILL can undo.

A 2.4.0 broker keeps committed group offsets in memory, hands them to its offset file store
every ``offsetStgCacheFlushMs`` (5 s) and writes the file every ``offsetStgFileSyncMs`` (6 s)
(``DefaultOffsetManager``, ``FileOffsetStorage``); a SIGKILL loses what the file does not hold
yet, so the group resumes at an older offset (docs/testing.md). :class:`OffsetTable` remembers
each change of the last :data:`OFFSET_HISTORY_SECONDS` so a crash can undo the newest ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["OFFSET_HISTORY_SECONDS", "OffsetKey", "OffsetTable"]

#: ``(group, topic, partition id)``.
OffsetKey = tuple[str, str, int]

#: Seconds of offset changes an :class:`OffsetTable` can undo (the most
#: ``start_broker(lose_offsets=...)`` accepts).
OFFSET_HISTORY_SECONDS = 60.0


class OffsetTable(dict[OffsetKey, int]):
    """Group offsets by ``(group, topic, partition id)`` (index bytes), a plain dict to read
    and write, which also records each assignment (``table[key] = offset``) with its time.

    Args:
        clock: monotonic seconds (read at each assignment).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self._clock = clock
        # (time, key, the value before; None when the key was absent), oldest first.
        self._changes: deque[tuple[float, OffsetKey, int | None]] = deque()

    def __setitem__(self, key: OffsetKey, value: int) -> None:
        now = self._clock()
        self._changes.append((now, key, self.get(key)))
        super().__setitem__(key, value)
        changes = self._changes
        while changes and changes[0][0] < now - OFFSET_HISTORY_SECONDS:
            changes.popleft()

    def roll_back(self, since: float) -> int:
        """Undo every assignment made at or after the monotonic time ``since``, newest first
        (what a SIGKILL loses of offsets not yet written to the offset file).

        Returns:
            How many assignments were undone.
        """
        changes = self._changes
        undone = 0
        while changes and changes[-1][0] >= since:
            _, key, before = changes.pop()
            if before is None:
                super().pop(key, None)
            else:
                super().__setitem__(key, before)
            undone += 1
        return undone
