"""lost_tail: when a broker register answer shows the store ended below the group's offset."""

from __future__ import annotations

import pytest

from tubemq_aio.protocol.lost_tail import LostTail, lost_tail


def test_a_loaded_offset_beyond_the_end_is_a_lost_tail() -> None:
    assert lost_tail(curr_offset=28 * 50, max_offset=28 * 40) == LostTail(
        stored_offset=1400, end_offset=1120
    )


def test_an_offset_one_record_beyond_an_empty_store_counts() -> None:
    assert lost_tail(curr_offset=28, max_offset=0) == LostTail(28, 0)


@pytest.mark.parametrize(
    ("curr", "top"),
    [
        (0, 0),  # an empty store, the group at its start
        (280, 280),  # caught up: the next message gets the group's offset
        (140, 280),  # behind: messages to read
        (0, 280),
    ],
)
def test_an_offset_within_the_store_is_not(curr: int, top: int) -> None:
    assert lost_tail(curr, top) is None


@pytest.mark.parametrize("top", [-1, -2])
def test_an_unreported_end_says_nothing(top: int) -> None:
    # A broker that reports no maximum (-1, or the protobuf default of a failed answer) cannot
    # show the store ended below the offset.
    assert lost_tail(curr_offset=280, max_offset=top) is None


def test_the_value_is_frozen() -> None:
    found = lost_tail(56, 28)
    assert found is not None
    with pytest.raises(AttributeError):
        found.end_offset = 0  # type: ignore[misc]
