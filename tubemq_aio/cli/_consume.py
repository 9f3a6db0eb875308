"""``tubemq-aio consume``: print messages as JSON lines (or raw bodies), acking as it prints."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from typing import Any, BinaryIO

from tubemq_aio.cli._common import EXIT_FAILURE, EXIT_OK, error_line, stop_on_signals
from tubemq_aio.consumer import Consumer, MessageBatch
from tubemq_aio.models import Message

__all__ = ["message_json", "run_consume"]

#: Seconds one ``getmany`` waits before the loop looks at signals and the idle timeout again.
POLL_INTERVAL = 0.5


def message_json(msg: Message) -> dict[str, Any]:
    """The JSON object printed for one message.

    The body is UTF-8 text when it decodes as such; otherwise it is base64 with
    ``"body_encoding": "base64"``.

    Args:
        msg: the consumed message.

    Returns:
        ``{topic, partition_key, message_id, msg_type, msg_time, attributes, body}``.
    """
    out: dict[str, Any] = {
        "topic": msg.topic,
        "partition_key": msg.partition_key,
        "message_id": msg.message_id,
        "msg_type": msg.msg_type,
        "msg_time": msg.msg_time.isoformat() if msg.msg_time is not None else None,
        "attributes": dict(msg.attributes),
    }
    try:
        out["body"] = msg.body.decode("utf-8")
    except UnicodeDecodeError:
        out["body"] = base64.b64encode(msg.body).decode("ascii")
        out["body_encoding"] = "base64"
    return out


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


async def run_consume(args: argparse.Namespace, out: BinaryIO | None = None) -> int:
    """Print messages of ``args.topic`` for group ``args.group`` until a limit or a signal.

    A batch is acked only after its lines were written and flushed, so an interrupted run
    loses nothing: the unprinted rest comes again to the group.

    Returns:
        0 when it ended by ``--count``, idle ``--timeout``, a signal or a closed stdout;
        1 when ``--timeout`` passed before ``--count`` messages arrived.
    """
    stream = out if out is not None else sys.stdout.buffer
    remaining: int | None = args.count
    printed = 0
    timed_out = False
    stop = asyncio.Event()
    async with Consumer(
        args.master, group=args.group, topics=_topics(args), consume_from=args.consume_from
    ) as consumer:
        with stop_on_signals(stop):
            idle_since = time.monotonic()
            while not stop.is_set() and remaining != 0:
                if args.timeout is not None and time.monotonic() - idle_since >= args.timeout:
                    timed_out = True
                    break
                batch = await consumer.getmany(max_records=remaining, timeout=POLL_INTERVAL)
                if not batch:
                    continue
                if stop.is_set() or not _write(stream, _render(batch, args.format)):
                    break  # not acked: the batch is delivered again
                await batch.ack()
                printed += len(batch)
                if remaining is not None:
                    remaining -= len(batch)
                idle_since = time.monotonic()
    if timed_out and remaining:
        error_line(f"timed out after {args.timeout} s idle with {printed} of {args.count} messages")
        return EXIT_FAILURE
    return EXIT_OK
