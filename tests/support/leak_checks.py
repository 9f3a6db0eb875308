"""What a test leaves behind: the file descriptors and tasks it opened and did not close.

File descriptors are told apart by number *and* by what they point at (``socket:[inode]``,
``pipe:[inode]``, a path), so a descriptor that something else (another test's leftover,
closed late by the garbage collector or a thread) closes during the test is not mistaken for
one the test closed, and a new socket that reuses a freed number still counts as new. Counting
them instead fails both ways: a leftover closing late hides a leak, and fewer descriptors after
than before fails a test that leaked nothing.
"""

from __future__ import annotations

import asyncio
import os

from tubemq_aio.testing import wait_until

#: This process's open file descriptors: number → what it points at.
FdSnapshot = dict[int, str]

_FD_DIR = "/proc/self/fd"


def open_fds() -> FdSnapshot:
    """The open file descriptors of this process (Linux), each with its target."""
    out: FdSnapshot = {}
    for name in os.listdir(_FD_DIR):
        try:
            out[int(name)] = os.readlink(f"{_FD_DIR}/{name}")
        except OSError:  # closed since the listing (the listing's own directory fd, for one)
            continue
    return out


def fds_opened_since(before: FdSnapshot) -> FdSnapshot:
    """The descriptors open now that were not open (to the same target) in ``before``."""
    return {fd: target for fd, target in open_fds().items() if before.get(fd) != target}


def live_tasks() -> set[asyncio.Task[object]]:
    """Unfinished tasks of the running loop other than the caller's."""
    me = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not me and not t.done()}


async def wait_released(
    fds_before: FdSnapshot,
    tasks_before: set[asyncio.Task[object]] | None = None,
    timeout: float = 5.0,
) -> None:
    """Wait until every descriptor opened since ``fds_before`` is closed and (when given) no
    task runs that did not run in ``tasks_before``: a closed socket's descriptor goes on a later
    loop iteration, a server's at its own pace.

    Raises:
        AssertionError: something stayed open for ``timeout`` seconds (it is named).
    """

    def extra_tasks() -> set[asyncio.Task[object]]:
        return set() if tasks_before is None else live_tasks() - tasks_before

    try:
        await wait_until(
            lambda: not fds_opened_since(fds_before) and not extra_tasks(),
            timeout,
            "every descriptor and task the test opened closed again",
        )
    except AssertionError as exc:
        raise AssertionError(
            f"leak: descriptors {fds_opened_since(fds_before)}, tasks {extra_tasks()}"
        ) from exc
