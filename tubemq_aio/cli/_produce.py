"""``tubemq-aio produce``: one message per input line, sent with bounded concurrency."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import stat
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from tubemq_aio.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    error_line,
    parse_attrs,
    stop_on_signals,
)
from tubemq_aio.cli._connect import open_client
from tubemq_aio.cli._input import LineReader, Outgoing, parse_json_line, parse_text_line
from tubemq_aio.cli._progress import make_progress
from tubemq_aio.errors import ConfigError, TubeMQError
from tubemq_aio.producer import Producer

__all__ = ["run_produce"]

#: Failed lines reported one by one before the rest are only counted.
MAX_REPORTED_FAILURES = 5
#: Seconds ``--rate`` lets sends run ahead of (or catch up with) the schedule.
PACE_SLACK = 0.02
#: Seconds between two updates of the progress display.
PROGRESS_INTERVAL = 0.2

Parser = Callable[[bytes, Outgoing], Outgoing | None]


class _Tally:
    """Counts and the first few failures of one run."""

    def __init__(self) -> None:
        self.sent = 0
        self.failed = 0
        self.skipped = 0

    def fail(self, line_no: int, problem: str) -> None:
        self.failed += 1
        if self.failed <= MAX_REPORTED_FAILURES:
            error_line(f"line {line_no}: {problem}")


class _Pacer:
    """Keeps sends at ``rate`` per second on average (no limit when ``rate`` is None).

    Sleeping once per message would cap the rate at the loop's timer resolution, so the pacer
    lets sends run until they are :data:`PACE_SLACK` seconds ahead of the schedule, then sleeps
    the difference; after a stall it catches up by at most :data:`PACE_SLACK` as well.
    """

    def __init__(self, rate: float | None) -> None:
        self._interval = 1.0 / rate if rate else 0.0
        self._next = time.monotonic()

    async def wait(self, stop: asyncio.Event) -> None:
        """Return when the next send is due (the first one at once), or as soon as ``stop`` is
        set (a low ``--rate`` must not hold off Ctrl-C until the next line is due)."""
        if not self._interval:
            return
        now = time.monotonic()
        due = max(self._next, now - PACE_SLACK)
        self._next = due + self._interval
        if due - now > PACE_SLACK:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(due - now):
                    await stop.wait()


#: Said once connected when the input is a terminal: the command waits for typed lines.
_TYPING_HINT = "type one message per line; Ctrl-D ends the input"


def _open_input(path: str) -> int:
    if path == "-":
        return sys.stdin.fileno()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    if stat.S_ISDIR(os.fstat(fd).st_mode):  # opens, but every read fails (EISDIR)
        os.close(fd)
        raise ConfigError(f"cannot read {path}: it is a directory")
    return fd


async def _send_all(
    producer: Producer,
    args: argparse.Namespace,
    queue: asyncio.Queue[tuple[int, bytes] | None],
    tally: _Tally,
    parse: Parser,
    defaults: Outgoing,
) -> None:
    """One of ``--concurrency`` workers: parse and send lines until the end marker."""
    while (item := await queue.get()) is not None:
        line_no, line = item
        try:
            out = parse(line, defaults)
        except ConfigError as err:
            tally.fail(line_no, str(err))
            continue
        if out is None:
            tally.skipped += 1
            continue
        try:
            await producer.send(
                args.topic,
                out.body,
                attributes=out.attributes or None,
                msg_type=out.msg_type,
                msg_time=out.msg_time,
                key=out.key,
            )
        except TubeMQError as err:
            tally.fail(line_no, f"{type(err).__name__}: {err}")
        else:
            tally.sent += 1


async def _tick(update: Callable[[], None]) -> None:
    """Refresh the progress display until cancelled."""
    while True:
        update()
        await asyncio.sleep(PROGRESS_INTERVAL)


async def _feed(
    reader: LineReader,
    queue: asyncio.Queue[tuple[int, bytes] | None],
    pacer: _Pacer,
    stop: asyncio.Event,
) -> bool:
    """Move input lines to the workers; returns False when stopped before the end."""
    line_no = 0
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            chunk = await _unless_stopped(reader.next_chunk(), stopped)
            if chunk is None:
                return not stop.is_set()
            line_no = await _queue_lines(chunk, line_no, queue, pacer, stop)
    finally:
        stopped.cancel()
    return False


async def _unless_stopped(
    read: Coroutine[None, None, list[bytes] | None], stopped: asyncio.Future[Any]
) -> list[bytes] | None:
    """The next chunk, or None as soon as ``stopped`` is done (a pending read is dropped)."""
    task = asyncio.ensure_future(read)
    waiting: set[asyncio.Future[Any]] = {task, stopped}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    return None


async def _queue_lines(
    chunk: list[bytes],
    line_no: int,
    queue: asyncio.Queue[tuple[int, bytes] | None],
    pacer: _Pacer,
    stop: asyncio.Event,
) -> int:
    """Queue the lines of one chunk (paced); returns the number of the last line queued."""
    for line in chunk:
        if stop.is_set():
            break
        line_no += 1
        await pacer.wait(stop)
        if stop.is_set():
            break
        await queue.put((line_no, line))
    return line_no


async def run_produce(args: argparse.Namespace) -> int:
    """Send every line of the input to ``args.topic``; print a summary on stderr.

    Returns:
        0 when every line was sent; 1 when a line failed or the run was interrupted.
    """
    defaults = Outgoing(b"", parse_attrs(args.attr), args.msg_type, None, args.key)
    parse: Parser = parse_json_line if args.json else parse_text_line
    fd = _open_input(args.input)
    tally = _Tally()
    stop = asyncio.Event()
    queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(args.concurrency)
    began = time.monotonic()
    # Typed lines: a progress display redraws (and erases) the line being typed.
    typed = os.isatty(fd)
    async with open_client(Producer, args, topics=[args.topic]) as producer:
        progress = make_progress(quiet=args.quiet or typed)
        reader = LineReader(fd)
        workers = [
            asyncio.create_task(_send_all(producer, args, queue, tally, parse, defaults))
            for _ in range(args.concurrency)
        ]
        ticker = asyncio.create_task(_tick(lambda: progress.update(tally.sent, tally.failed)))
        try:
            with stop_on_signals(stop):
                if typed and not args.quiet:  # Ctrl-C now ends the input, as documented
                    print(_TYPING_HINT, file=sys.stderr, flush=True)
                finished = await _feed(reader, queue, _Pacer(args.rate), stop)
                for _ in workers:
                    await queue.put(None)
                await asyncio.gather(*workers)
        finally:
            reader.stop()
            if args.input != "-":
                os.close(fd)
            for task in [*workers, ticker]:
                task.cancel()
            progress.close()
    took = time.monotonic() - began
    rate = tally.sent / took if took > 0 else 0.0
    extra = f", {tally.skipped} empty lines skipped" if tally.skipped else ""
    if not args.quiet:
        print(
            f"sent {tally.sent} messages to {args.topic}, {tally.failed} failed{extra}"
            f" in {took:.2f} s ({rate:,.0f} msg/s)",
            file=sys.stderr,
        )
    if not finished:
        error_line("interrupted before the end of the input")
    return EXIT_OK if finished and not tally.failed else EXIT_FAILURE
