"""Finding where a restarted broker replaced the messages a consumer had read.

A broker killed before it flushed comes back without its newest messages and hands their
offsets to the next messages it stores. When those fill the store past the group's stored
offset before the group registers there again, the register answer looks normal
(``currOffset <= maxOffset``, so :func:`~tubemq_aio.protocol.lost_tail.lost_tail` sees
nothing) and the group would resume at its stored offset, skipping every new message below it.
No broker answer carries the offset the broker came back at, and a message id carries no
wall-clock time (the broker builds it from ``System.nanoTime()``, of which it keeps the low 42
bits), but a message id tells two messages at one offset apart: the consumer remembers the
ids it read at a few offsets (:class:`TailRecord`) and, when it registers a partition again
after losing it, reads those offsets back (:class:`TailCheck`). Where an id differs, the store
there is new; the group resumes at the newest offset whose message is still the one it read
(docs/failures.md).

Pure: no I/O, no clock. Offsets are index offsets (bytes of the store's index, which the
partitions of one store share), so only a batch's start offset (``currOffset`` of the
GetMessage answer, docs/protocol/consumer.md §4.2) is known exactly, not each message's.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE

__all__ = [
    "DEFAULT_LOST_TAIL_WINDOW",
    "DEFAULT_TAIL_CHECK_DEPTH",
    "MAX_LOST_TAIL_WINDOW",
    "TailCheck",
    "TailProbe",
    "TailRecord",
    "TailVerdict",
    "Verdict",
    "unrecorded_resume",
]

#: Default number of remembered batch starts per partition (``ConsumerConfig.tail_check_depth``):
#: the newest batch and older ones at about 1, 2, 4, ... 2**14 batches back.
DEFAULT_TAIL_CHECK_DEPTH = 16

#: Default of ``ConsumerConfig.lost_tail_window``: the most messages a 2.4.0 broker holds
#: unflushed per store at its default settings, which a SIGKILL can drop. A store keeps two
#: memory caches (one filling, one being flushed) of ``memCacheMsgCntInK * 512`` messages each,
#: so ``memCacheMsgCntInK * 1024`` in all; ``memCacheMsgCntInK`` is a topic setting (the
#: broker's default when the topic sets none), 10 by default (``TopicMetadata``).
DEFAULT_LOST_TAIL_WINDOW = 10 * 1024
#: The largest ``ConsumerConfig.lost_tail_window``: more than two caches can hold (a broker
#: counts a cache's messages, ``memCacheMsgCntInK * 512``, in a Java int, below 2**31).
MAX_LOST_TAIL_WINDOW = 2**32

# Layout of TailRecord._cells: per level 2 cells (start offset, first message id); then the
# newest batch's last message id, its message count and the offset after it (once known).
_UNSET = -1


class TailRecord:
    """What a consumer read of one partition, remembered in bounded memory.

    Per fetched batch: its start offset, its first and last message id and its size. It keeps
    the newest batch whole and the starts of older batches on a ladder whose spacing doubles
    (level ``i`` holds a batch about ``2**(i-1)`` to ``2**(i+1)`` batches old), so ``depth``
    levels reach about ``2**(depth-2)`` batches back. Cost: one ``array('q')`` of
    ``2 * depth + 3`` cells (``16 * depth + 104`` bytes; 360 at the default depth 16) and
    O(1) amortized work per batch (never per message).

    Args:
        depth: levels kept, ``>= 1``.

    Raises:
        ValueError: ``depth < 1``.
    """

    __slots__ = ("_batches", "_cells", "_last", "depth")

    def __init__(self, depth: int = DEFAULT_TAIL_CHECK_DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.depth = depth
        self._cells = array("q", [_UNSET]) * (2 * depth + 3)
        self._last = 2 * depth  # the newest batch's last id, its count, the offset after it
        self._batches = 0

    def __repr__(self) -> str:
        return f"<TailRecord batches={self._batches} points={self.points()}>"

    @property
    def batches(self) -> int:
        """Batches added since the record was created or last cleared."""
        return self._batches

    def clear(self) -> None:
        """Forget everything (the partition moved to another reader, or was read again from
        elsewhere)."""
        cells = self._cells
        for i in range(len(cells)):
            cells[i] = _UNSET
        self._batches = 0

    def add(self, start: int, first_id: int, last_id: int, count: int) -> None:
        """Remember a fetched batch of ``count >= 1`` messages starting at index offset
        ``start``. A batch that starts below the newest one (the partition was read again
        from an earlier offset) starts the record afresh."""
        cells = self._cells
        n = self._batches
        if n and start < cells[0]:
            self.clear()
            n = 0
        n += 1
        self._batches = n
        if not n & 1:
            # Level j takes level j-1's batch every 2**j batches (all at once, by one copy).
            shift = (n & -n).bit_length() - 1
            if shift >= self.depth:
                shift = self.depth - 1
            cells[2 : 2 * shift + 2] = cells[0 : 2 * shift]
        cells[0] = start
        cells[1] = first_id
        last = self._last
        cells[last] = last_id
        cells[last + 1] = count
        cells[last + 2] = _UNSET

    def note_end(self, offset: int) -> None:
        """Remember ``offset`` as the end of the newest batch (the group's offset a commit of
        it answered); ignored when below the newest batch's start or nothing was added."""
        cells = self._cells
        if self._batches and offset >= cells[0]:
            cells[self._last + 2] = offset

    @property
    def end(self) -> int | None:
        """The offset right after the newest batch once :meth:`note_end` told it, else None."""
        end = self._cells[self._last + 2]
        return None if end == _UNSET else end

    def points(self) -> list[tuple[int, int]]:
        """The remembered ``(start offset, first message id)`` pairs, newest first, without
        repeats (empty when nothing was added)."""
        cells = self._cells
        out: list[tuple[int, int]] = []
        for i in range(0, 2 * self.depth, 2):
            start = cells[i]
            if start == _UNSET:
                break
            if not out or start < out[-1][0]:
                out.append((start, cells[i + 1]))
        return out

    def newest(self) -> tuple[int, int, int, int] | None:
        """The newest batch as ``(start, first id, last id, count)``, or None."""
        if not self._batches:
            return None
        cells, last = self._cells, self._last
        return cells[0], cells[1], cells[last], cells[last + 1]


@dataclass(frozen=True, slots=True)
class TailProbe:
    """One read-back the check asks for.

    Attributes:
        offset: index offset to register at and read from.
        want: message ids to read from there (the newest batch's size for the first probe,
            else 1; 0 for the last probe of a check that only asks where the store begins);
            fewer are fine when the partition has no more.
    """

    offset: int
    want: int


class Verdict(enum.Enum):
    """What a :class:`TailCheck` found."""

    #: Every message of the newest remembered batch is still there: resume where the broker
    #: loaded the group.
    INTACT = "intact"
    #: The broker replaced messages the consumer had read: resume at the newest remembered
    #: offset whose message is unchanged (it and what follows up to the replacement are read
    #: again).
    REPLACED = "replaced"
    #: Even the oldest remembered offset holds another message, and the store begins below it:
    #: resume there (what the broker replaced below it is not found; it may be lost).
    UNVERIFIED = "unverified"
    #: The broker loaded an offset beyond the end of the newest remembered batch: another
    #: member read on after this consumer lost the partition, so the record says nothing
    #: about the store now. Resume where the broker loaded the group, without a probe.
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class TailVerdict:
    """The outcome of a :class:`TailCheck`.

    Attributes:
        verdict: what was found.
        resume_offset: the index offset to register the group at: the broker's loaded offset
            for :attr:`Verdict.INTACT`, else the lower of it and the offset found.
        probes: read-backs it took.
    """

    verdict: Verdict
    resume_offset: int
    probes: int


class TailCheck:
    """Which remembered offsets to read back, and where the group resumes (docs/failures.md).

    The first probe reads the newest batch again: when its first and last ids are where they
    were, nothing the consumer read was replaced (:attr:`Verdict.INTACT`). Otherwise a binary
    search over the older remembered starts finds the newest whose first message is unchanged:
    the replaced region begins after it, because a broker replaces only a tail (every offset
    from where it came back on). A probe that reads nothing (the store ends there), or a first
    id that differs, counts as replaced; a probe the broker started later than asked (the
    offset is below the store's minimum, long since expired) counts as unchanged. When even
    the oldest remembered start holds another message, one more probe asks for offset 0, which
    the broker clamps to the store's minimum: a store that begins there (the broker replaced
    all it had, e.g. a new topic whose messages were all still in its memory cache) hides
    nothing below it (:attr:`Verdict.REPLACED`); otherwise :attr:`Verdict.UNVERIFIED`.

    Args:
        record: what the consumer read of the partition.
        loaded: the offset the broker loaded for the group at the register that precedes the
            check (``currOffset``); the group never resumes above it.

    Raises:
        ValueError: ``record`` is empty.
    """

    __slots__ = (
        "_asking_min",
        "_found",
        "_hi",
        "_lo",
        "_loaded",
        "_newest",
        "_points",
        "_probes",
        "_verdict",
    )

    def __init__(self, record: TailRecord, loaded: int) -> None:
        newest = record.newest()
        if newest is None:
            raise ValueError("an empty record has nothing to check")
        self._newest = newest
        self._points = record.points()
        self._loaded = loaded
        self._probes = 0
        self._verdict: TailVerdict | None = None
        # Binary search over the older points (indices 1..): lo..hi still open; _found is the
        # newest (lowest index) point found unchanged so far.
        self._lo = 1
        self._hi = len(self._points) - 1
        self._found: int | None = None
        # Every remembered start holds another message: the last probe asks where the store
        # begins.
        self._asking_min = False
        end = record.end
        if end is not None and loaded > end:
            self._end(Verdict.STALE, loaded)

    @property
    def verdict(self) -> TailVerdict | None:
        """The outcome once the check ended, else None."""
        return self._verdict

    def next_probe(self) -> TailProbe | None:
        """The next read-back, or None when :attr:`verdict` is set."""
        if self._verdict is not None:
            return None
        if self._probes == 0:
            return TailProbe(self._newest[0], max(1, self._newest[3]))
        if self._asking_min:
            return TailProbe(0, 0)
        return TailProbe(self._points[self._middle()][0], 1)

    def _middle(self) -> int:
        return (self._lo + self._hi) // 2

    def on_read(self, served_from: int, ids: Sequence[int]) -> TailVerdict | None:
        """Feed the answer to :meth:`next_probe`'s probe.

        Args:
            served_from: the offset the broker registered the group at for the probe (its
                ``currOffset``; the probe's offset clamped to the store's range).
            ids: the message ids read from there, in order (empty: nothing there).

        Returns:
            The verdict once the check ended, else None (call :meth:`next_probe` again).

        Raises:
            RuntimeError: the check already ended.
        """
        if self._verdict is not None:
            raise RuntimeError("the tail check already ended")
        probe = self.next_probe()
        assert probe is not None
        self._probes += 1
        if self._probes == 1:
            start, first_id, last_id, count = self._newest
            if _unchanged(probe.offset, first_id, served_from, ids):
                if len(ids) >= count and ids[count - 1] == last_id:
                    return self._end(Verdict.INTACT, self._loaded)
                return self._end(Verdict.REPLACED, start)
            return self._search_or_end()
        oldest = self._points[-1][0]
        if self._asking_min:
            if served_from >= oldest:  # the store begins there: nothing below it
                return self._end(Verdict.REPLACED, oldest)
            return self._end(Verdict.UNVERIFIED, oldest)
        index = self._middle()
        offset, first_id = self._points[index]
        if _unchanged(offset, first_id, served_from, ids):
            # Unchanged here: the newest unchanged one is here or newer (lower index).
            self._found = index
            self._hi = index - 1
        else:
            self._lo = index + 1
        return self._search_or_end()

    def _search_or_end(self) -> TailVerdict | None:
        if self._lo <= self._hi:
            return None
        if self._found is not None:
            return self._end(Verdict.REPLACED, self._points[self._found][0])
        oldest = self._points[-1][0]
        if oldest <= 0:  # nothing lies below offset 0
            return self._end(Verdict.REPLACED, oldest)
        self._asking_min = True
        return None

    def _end(self, verdict: Verdict, offset: int) -> TailVerdict:
        self._verdict = TailVerdict(verdict, min(offset, self._loaded), self._probes)
        return self._verdict


def _unchanged(offset: int, first_id: int, served_from: int, ids: Sequence[int]) -> bool:
    """Whether a probe at ``offset`` shows the message read there before still in place."""
    if served_from > offset:
        return True  # below the store's minimum now: expired long ago, never replaced
    if served_from < offset or not ids:
        return False  # the store ends below it, or nothing is there
    return ids[0] == first_id


def unrecorded_resume(stored: int, end: int, window: int) -> int:
    """Where a group resumes a partition whose broker lost the tail of its store, for a member
    with no :class:`TailRecord` of it (docs/failures.md).

    The register loaded the group's ``stored`` offset beyond the store's ``end``: the broker
    came back at some offset ``R <= end`` (the last flush before its SIGKILL) and has stored
    new messages from ``R`` to ``end`` since. Nothing a member without a record can read tells
    ``R`` (no answer carries it; the message ids hold the broker host's monotonic clock, and a
    store refilled from empty shows no jump in it), but the broker drops at most the messages
    its memory caches held, ``window`` of them, all at or above ``R``, and the dropped ones
    began at ``R`` and reached at least ``stored``. So ``R >= stored - window * 28``: resuming
    there delivers every new message, and those the group had read between there and ``R``
    come again (at most ``window`` messages of the store, shared by its partitions).

    Args:
        stored: the group offset the broker loaded (``currOffset``, index bytes), ``> end``.
        end: the store's end now (``maxOffset``, index bytes, ``>= 0``).
        window: the most messages a broker holds unflushed per store (``>= 0``; 0: resume at
            ``end``, skipping what was stored since the broker came back).

    Returns:
        The index offset to register at: ``min(end, max(0, stored - window * 28))`` (the
        broker raises it to the store's minimum).

    Raises:
        ValueError: ``window < 0``, ``end < 0`` or ``stored <= end``.
    """
    if window < 0 or end < 0 or stored <= end:
        raise ValueError(f"need stored > end >= 0 and window >= 0, got {stored}, {end}, {window}")
    return min(end, max(0, stored - window * INDEX_MSG_UNIT_SIZE))
