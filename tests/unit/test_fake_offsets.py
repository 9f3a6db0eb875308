"""FakeCluster's group offsets: the changes a SIGKILL can undo (testing/_fake_offsets.py)."""

from __future__ import annotations

from tubemq_aio.testing._fake_offsets import OFFSET_HISTORY_SECONDS, OffsetTable

KEY = ("g", "t", 0)
OTHER = ("g", "t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_roll_back_undoes_the_newest_changes_only() -> None:
    clock = Clock()
    table = OffsetTable(clock)
    table[KEY] = 28
    clock.now = 110.0
    table[KEY] = 56
    table[OTHER] = 28  # new key in the window: removed again
    clock.now = 111.0
    table[KEY] = 84
    assert table.roll_back(since=105.0) == 3
    assert table == {KEY: 28}
    assert table.roll_back(since=105.0) == 0  # nothing left to undo in the window


def test_it_reads_like_a_dict_and_forgets_old_history() -> None:
    clock = Clock()
    table = OffsetTable(clock)
    table[KEY] = 28
    assert table.get(KEY) == 28
    assert dict(table) == {KEY: 28}
    clock.now += OFFSET_HISTORY_SECONDS + 1
    table[OTHER] = 56  # prunes the change to KEY
    assert table.roll_back(since=0.0) == 1  # only OTHER's change was still remembered
    assert table == {KEY: 28}
