"""Progress display for ``produce``: a rich bar on a terminal, a plain line without rich."""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

__all__ = ["Progress", "make_progress"]

#: Seconds between two updates of the plain progress line.
PLAIN_INTERVAL = 0.5


class Progress(Protocol):
    """Something that shows how many messages went out so far."""

    def update(self, sent: int, failed: int) -> None:
        """Show the current counts."""

    def close(self) -> None:
        """Remove or finish the display."""


class _Silent:
    """No display (stderr is not a terminal)."""

    def update(self, sent: int, failed: int) -> None:
        """Ignore the counts."""

    def close(self) -> None:
        """Nothing to close."""


class _PlainLine:
    """One line rewritten in place with ``\\r``, at most every :data:`PLAIN_INTERVAL` s."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._began = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, sent: int, failed: int) -> None:
        """Rewrite the line if enough time passed."""
        now = time.monotonic()
        if now - self._last < PLAIN_INTERVAL:
            return
        self._last = now
        rate = sent / max(now - self._began, 1e-9)
        self._stream.write(f"\rsent {sent}  failed {failed}  {rate:,.0f} msg/s ")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line so the summary starts on a fresh one."""
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()


class _RichBar:
    """A rich progress display: count, failures, rate and elapsed time (the total is unknown)."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (
            Progress as RichProgress,
        )
        from rich.progress import (
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._began = time.monotonic()
        self._bar: Any = RichProgress(
            SpinnerColumn(),
            TextColumn("sent {task.completed:,.0f}"),
            TextColumn("failed {task.fields[failed]}"),
            TextColumn("{task.fields[rate]} msg/s"),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
        )
        self._task = self._bar.add_task("produce", total=None, failed=0, rate="0")
        self._bar.start()

    def update(self, sent: int, failed: int) -> None:
        """Update the counts (rich refreshes on its own timer)."""
        rate = sent / max(time.monotonic() - self._began, 1e-9)
        self._bar.update(self._task, completed=sent, failed=failed, rate=f"{rate:,.0f}")

    def close(self) -> None:
        """Stop the display."""
        self._bar.stop()


def make_progress(stream: TextIO | None = None, *, quiet: bool = False) -> Progress:
    """Pick the display: rich on a terminal when installed, else a plain line; none off a tty.

    Args:
        stream: where to draw (default ``sys.stderr``).
        quiet: no display at all (``-q``).

    Returns:
        The display.
    """
    stream = stream if stream is not None else sys.stderr
    if quiet or not stream.isatty():
        return _Silent()
    try:
        return _RichBar(stream)
    except ImportError:  # the `cli` extra is not installed
        return _PlainLine(stream)
