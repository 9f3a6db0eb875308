"""The rewind decision is pure: only a fresh register that lands below the committed offset
moves it back, and only to where that register landed."""

from __future__ import annotations

import pytest

from tubemq_aio.gateway.engine.fetch_attempt import rewind_target
from tubemq_aio.gateway.tubemq.tube_read import TubeRead


@pytest.mark.parametrize(
    ("cmt", "read", "expected"),
    [
        # the restarted broker ends at 280: a register at 560 was clamped there (twice)
        (560, TubeRead("empty", 280, 280, 280, registered=True), 280),
        (560, TubeRead("ok", 280, 336, 336, registered=True), 280),
        (560, TubeRead("ok", 0, 28, 28, registered=True), 0),
        # at or above cmt: nothing lost under the committed offset
        (560, TubeRead("empty", 560, 560, 560, registered=True), None),
        (560, TubeRead("ok", 588, 616, 616, registered=True), None),  # min moved up: a skip
        # no fresh register: a claimed cursor, a max from GetMessage/commit never moves back
        (560, TubeRead("ok", 280, 280, 280), None),
        (560, TubeRead("empty", 560, 560, 100), None),
        # a read that failed or was throttled decides nothing
        (560, TubeRead("error", 280, 280, 280, registered=True), None),
        (560, TubeRead("throttled", 280, 280, 280, registered=True), None),
    ],
)
def test_rewind_target(cmt: int, read: TubeRead, expected: int | None) -> None:
    assert rewind_target(cmt, read) == expected
