"""``tubemq-aio consume``: print messages as JSON lines (or raw bodies), acking as it prints.

Two ways in: as a member of a server-balanced ``--group`` (the master assigns partitions), or
``--partition KEY|all [--offset N|earliest|latest|@TIME]`` through the client-balanced consumer,
which reads exactly the partitions named, from the offset asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, BinaryIO

from tubemq_aio.checks import Checks
from tubemq_aio.cli._common import EXIT_FAILURE, EXIT_OK, error_line, stop_on_signals
from tubemq_aio.cli._connect import open_client
from tubemq_aio.consumer import ClientBalancedConsumer, Consumer, MessageBatch
from tubemq_aio.models import Message

#: Either kind of consumer the command reads with.
AnyConsumer = Consumer | ClientBalancedConsumer

__all__ = ["at_end", "message_json", "run_consume"]

#: Seconds one ``getmany`` waits before the loop looks at signals and the idle timeout again.
POLL_INTERVAL = 0.5
#: Seconds a signal waits for the batch being written to finish (it is acked if it does; a
#: reader that stopped reading gets it again from the group, at least once).
STOP_GRACE = 1.0


def message_json(msg: Message) -> dict[str, Any]:
    """The JSON object printed for one message: everything ``produce --json`` needs to send it
    again, and where it came from.

    ``message_id`` is a string (a 64-bit id loses digits as a JSON number in many readers). The
    body is UTF-8 text with ``"body_encoding": "utf-8"`` when it decodes as such, otherwise
    base64 with ``"body_encoding": "base64"``.

    Args:
        msg: the consumed message.

    Returns:
        ``{topic, partition_key, message_id, msg_type, msg_time, attributes, body,
        body_encoding}``.
    """
    out: dict[str, Any] = {
        "topic": msg.topic,
        "partition_key": msg.partition_key,
        "message_id": str(msg.message_id),
        "msg_type": msg.msg_type,
        "msg_time": msg.msg_time.isoformat() if msg.msg_time is not None else None,
        "attributes": dict(msg.attributes),
    }
    try:
        out["body"] = msg.body.decode("utf-8")
        out["body_encoding"] = "utf-8"
    except UnicodeDecodeError:
        out["body"] = base64.b64encode(msg.body).decode("ascii")
        out["body_encoding"] = "base64"
    return out


def at_end(consumer: AnyConsumer) -> bool:
    """True when the consumer holds partitions and each is read to its end: its last fetch
    found no new message (``PartitionPosition.at_end``)."""
    positions = consumer.positions().values()
    return bool(positions) and all(p.at_end for p in positions)


def _render(batch: MessageBatch, fmt: str) -> bytes:
    if fmt == "raw":
        return b"".join(bytes(m.body) + b"\n" for m in batch)
    lines = (json.dumps(message_json(m), ensure_ascii=False) for m in batch)
    return ("\n".join(lines) + "\n").encode()


def _topics(args: argparse.Namespace) -> Any:
    return {args.topic: {args.msg_type}} if args.msg_type else [args.topic]


def _write(out: BinaryIO, data: bytes) -> bool:
    """Write and flush; False when the reader went away (``consume | head``)."""
    try:
        out.write(data)
        out.flush()
    except BrokenPipeError:
        return False
    return True


class _Output:
    """``out`` written by a thread of its own: a reader that stops reading (a full pipe) blocks
    that thread, not the event loop, so the consumer's heartbeats go on and a signal still
    ends the command (the thread is a daemon: a write blocked for good does not hold the exit).
    """

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        # A file descriptor is written with os.write, outside the stream's buffer and its
        # lock: a write blocked for good would keep that lock, and the interpreter's last
        # flush of stdout at exit would abort on it.
        self._fd: int | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fd = out.fileno()
            out.flush()
            self._fd = fd
        self._queue: queue.SimpleQueue[tuple[bytes, asyncio.Future[bool]] | None] = (
            queue.SimpleQueue()
        )
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._run, name="consume-output", daemon=True).start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            data, done = item
            written: bool | OSError
            try:
                written = _write(self._out, data) if self._fd is None else _write_fd(self._fd, data)
            except OSError as exc:  # a full disk (ENOSPC), EIO, ...: the write's caller says it
                written = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(_settle, done, written)

    async def write(self, data: bytes, stop: asyncio.Event) -> bool:
        """Write and flush ``data``; False when the reader went away, or when ``stop`` was set
        and the write did not end within :data:`STOP_GRACE` (it may still end later).

        Raises:
            OSError: the write failed otherwise (``No space left on device``, say); the batch
                is not acked, and comes again to the group.
        """
        done: asyncio.Future[bool] = self._loop.create_future()
        self._queue.put((data, done))
        stopped = asyncio.ensure_future(stop.wait())
        either: set[asyncio.Future[Any]] = {done, stopped}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not done.done():  # stopped first: the write may be a moment from its end (acked
            await asyncio.wait({done}, timeout=STOP_GRACE)  # then); a stalled one is not
        return done.done() and done.result()

    def close(self) -> None:
        """End the thread once it wrote what it was given (at once when it is idle)."""
        self._queue.put(None)


def _write_fd(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to ``fd``; False when the reader went away."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        return False
    return True


def _settle(done: asyncio.Future[bool], written: bool | OSError) -> None:
    if done.done():
        return
    if isinstance(written, OSError):
        done.set_exception(written)
    else:
        done.set_result(written)


#: Partition keys an error about an unknown one lists before "…".
_LISTED_KEYS = 8


def _check_partitions(keys: list[str], known: list[str], topic: str) -> None:
    """Refuse a ``--partition`` key the topic does not have, naming those it has.

    Raises:
        ConfigError: a key is not one of ``known`` (a usage error: nothing was read).
    """
    unknown = [key for key in keys if key not in known]
    if unknown:
        listed = ", ".join(known[:_LISTED_KEYS]) + (", …" if len(known) > _LISTED_KEYS else "")
        Checks("arguments").fail(
            f"--partition {', '.join(unknown)}: topic {topic} has no such partition (a key is "
            f"BROKER_ID:TOPIC:PARTITION_ID; it has {listed}: "
            f"`tubemq-aio partitions --topic {topic}` lists them)"
        )


async def _connect_partitions(consumer: ClientBalancedConsumer, args: argparse.Namespace) -> None:
    """Connect the ``--partition`` keys (``all``: every partition) at ``--offset``; a key
    given twice is connected once."""
    keys = list(dict.fromkeys(args.partition))
    known = [m.partition_key for m in await consumer.partitions()]
    if "all" in keys:
        keys = known
    _check_partitions(keys, known, args.topic)
    at_time: dict[str, int] = {}
    if isinstance(args.offset, datetime):
        found = await consumer.search_times(
            dict.fromkeys(keys, args.offset), consumer.config.time_search_timeout
        )
        at_time = {key: f.offset for key, f in found.items()}
    for key in keys:
        offset: int | None
        if key in at_time:
            offset = at_time[key]
        elif args.offset == "earliest":
            offset = 0  # the broker moves it up to the oldest message it still has
        elif args.offset == "latest":
            offset = (await consumer.offset_bounds(key))[1]
        else:
            offset = args.offset
        await consumer.connect(key, offset)


@contextlib.asynccontextmanager
async def _open(args: argparse.Namespace) -> AsyncIterator[AnyConsumer]:
    checks = Checks("arguments")
    if args.finish_batch and args.count is None:
        checks.problem("--finish-batch needs --count")
    if not args.partition:
        if args.offset is not None:
            checks.problem("--offset needs --partition (a group starts where it left off)")
        if args.group is None:
            checks.problem("consume needs --group, or --partition KEY|all")
    checks.done()
    if not args.partition:
        consumer: AnyConsumer = open_client(
            Consumer,
            args,
            group=args.group,
            topics=_topics(args),
            consume_from=args.consume_from,
            msg_time_zone=args.msg_time_zone,
        )
        async with consumer:
            yield consumer
        return
    group = args.group or f"tubemq-aio-cli-{uuid.uuid4().hex[:12]}"
    balanced = open_client(
        ClientBalancedConsumer,
        args,
        group=group,
        topics=_topics(args),
        consume_from=args.consume_from,
        msg_time_zone=args.msg_time_zone,
    )
    async with balanced:
        await _connect_partitions(balanced, args)
        yield balanced


def _waiting_line(args: argparse.Namespace) -> str:
    """What a group consumer on a terminal says once started: it may print nothing for a long
    time (a new group starts at the latest message by default)."""
    start = args.consume_from
    if isinstance(start, datetime):
        when = start.isoformat()
        where = f"every partition starts at its first message stamped at or after {when}"
    else:
        hint = "; --from earliest reads what is already stored" if start == "latest" else ""
        where = f"a group without a stored offset starts at {start}{hint}"
    return f"reading {args.topic} as group {args.group} ({where}); Ctrl-C ends"


async def run_consume(args: argparse.Namespace, out: BinaryIO | None = None) -> int:
    """Print messages of ``args.topic`` until a limit, the end (``-e``) or a signal.

    A batch is acked only after its lines were written and flushed, so an interrupted run
    loses nothing: the unprinted rest comes again to the group.

    Returns:
        0 when it ended by ``--count``, ``--exit-at-end``, idle ``--timeout``, a signal or a
        closed stdout; 1 when ``--timeout`` passed before ``--count`` messages arrived.
    """
    stream = out if out is not None else sys.stdout.buffer
    remaining: int | None = args.count
    printed = 0
    timed_out = reached_end = False
    stop = asyncio.Event()
    async with _open(args) as consumer:
        with stop_on_signals(stop), contextlib.closing(_Output(stream)) as output:
            if not args.quiet and not args.partition and sys.stderr.isatty():
                print(_waiting_line(args), file=sys.stderr, flush=True)  # Ctrl-C now ends it
            idle_since = time.monotonic()
            while not stop.is_set() and (remaining is None or remaining > 0):
                if args.timeout is not None and time.monotonic() - idle_since >= args.timeout:
                    timed_out = True
                    break
                limit = None if args.finish_batch else remaining
                batch = await consumer.getmany(max_records=limit, timeout=POLL_INTERVAL)
                if not batch:
                    if args.exit_at_end and at_end(consumer):
                        reached_end = True
                        break
                    continue
                if stop.is_set() or not await output.write(_render(batch, args.format), stop):
                    break  # not acked: the batch is delivered again
                await batch.ack()
                printed += len(batch)
                if remaining is not None:
                    remaining -= len(batch)
                idle_since = time.monotonic()
    if timed_out and remaining:
        error_line(f"timed out after {args.timeout} s idle with {printed} of {args.count} messages")
        return EXIT_FAILURE
    if reached_end and not args.quiet:
        print(f"reached the end of every partition: {printed} messages", file=sys.stderr)
    return EXIT_OK
