"""Input for ``produce``: lines read off the event loop, and what one line means.

A reader thread does blocking ``os.read`` calls (so a slow pipe or a terminal never stalls the
loop), splits complete lines and hands them over in chunks through a bounded queue: a producer
slower than its input stops the reading instead of buffering the whole file.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tubemq_aio.checks import Checks, is_utf8

__all__ = ["LineReader", "Outgoing", "parse_json_line", "parse_text_line"]

#: Bytes per ``os.read`` call of the reader thread.
READ_SIZE = 64 * 1024
#: Chunks of lines the reader may be ahead of the senders.
QUEUE_CHUNKS = 8


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send, as parsed from an input line."""

    body: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    msg_type: str | None = None
    msg_time: datetime | str | None = None
    key: str | None = None


def _strip_eol(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


def parse_text_line(line: bytes, defaults: Outgoing) -> Outgoing | None:
    """The line (without its end of line) is the body; options come from ``defaults``.

    Returns:
        The message, or None for an empty line (skipped: TubeMQ stores no empty bodies).
    """
    body = _strip_eol(line)
    if not body:
        return None
    return Outgoing(body, defaults.attributes, defaults.msg_type, None, defaults.key)


def _body_of(checks: Checks, obj: dict[str, Any]) -> bytes:
    body = obj.get("body")
    encoding = obj.get("body_encoding", "utf-8")
    checks.choice('"body_encoding"', encoding, ("utf-8", "base64"))
    if "body" not in obj:
        checks.problem('the object has no "body" (the message to send)')
        return b""
    if not isinstance(body, str):
        checks.instance('"body"', body, str)  # records the problem
        return b""
    if encoding != "base64":
        if not is_utf8(body):
            checks.problem('"body" is not UTF-8 text (a lone surrogate escape?)')
            return b""
        return body.encode()
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error as err:
        checks.problem(f'"body" is not valid base64: {err}')
        return b""


def _str_or_none(checks: Checks, obj: dict[str, Any], name: str, default: str | None) -> str | None:
    value = obj.get(name, default)
    if not checks.instance(f'"{name}"', value, str, optional=True):
        return None
    if value is not None and not is_utf8(value):
        checks.problem(f'"{name}" is not UTF-8 text (a lone surrogate escape?)')
        return None
    return value


def parse_json_line(line: bytes, defaults: Outgoing) -> Outgoing | None:
    """Parse ``{"body": ..., "attributes": {...}, "msg_type": ..., "key": ...}``.

    Accepts what ``consume --format json`` prints (``body_encoding``, ``msg_time``; the other
    fields are ignored). Attributes given on the command line apply unless the line overrides
    them.

    Returns:
        The message, or None for a blank line.

    Raises:
        ConfigError: the line is not such an object.
    """
    text = _strip_eol(line).strip()
    if not text:
        return None
    checks = Checks("JSON line")
    try:
        obj = json.loads(text)
    except ValueError as err:
        checks.problem(f"not JSON: {err}")
        obj = None
    except RecursionError:
        checks.problem("not JSON this program can read: nested too deeply")
        obj = None
    if checks.ok and not isinstance(obj, dict):
        checks.problem("expected a JSON object with a body")
    checks.done()
    attrs = obj.get("attributes") or {}
    if not isinstance(attrs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()
    ):
        checks.problem('"attributes" must map strings to strings')
    body = _body_of(checks, obj)
    msg_type = _str_or_none(checks, obj, "msg_type", defaults.msg_type)
    key = _str_or_none(checks, obj, "key", defaults.key)
    msg_time = _str_or_none(checks, obj, "msg_time", None)
    when = _parse_time(checks, msg_time) if msg_time else None
    checks.done()
    return Outgoing(body, {**defaults.attributes, **attrs}, msg_type, when, key)


def _parse_time(checks: Checks, text: str) -> datetime | str | None:
    if len(text) == 12 and text.isdigit():  # yyyyMMddHHmm, as the producer takes it
        return text
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        checks.problem(f'"msg_time" {text!r} is neither ISO 8601 nor yyyyMMddHHmm')
        return None


class LineReader:
    """Reads a file descriptor in a daemon thread; ``await next_chunk()`` returns its lines.

    Args:
        fd: the descriptor to read (stdin or an opened file); not closed here.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[list[bytes] | BaseException | None] = asyncio.Queue(QUEUE_CHUNKS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tubemq-aio-cli-reader", daemon=True)
        self._thread.start()

    def _hand_over(self, item: list[bytes] | BaseException | None) -> bool:
        try:
            future = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        except RuntimeError:  # the loop is closed: nobody reads any more
            return False
        while not self._stopped.is_set():
            try:
                future.result(timeout=0.2)
                return True
            except TimeoutError:
                continue
        future.cancel()
        return False

    def _run(self) -> None:
        # The start of a line not ended yet grows in place: joining each read to it anew
        # copied a long line once per read (a 60 MB line without newline took 33 s).
        tail = bytearray()
        try:
            while not self._stopped.is_set():
                data = os.read(self._fd, READ_SIZE)
                if not data:
                    break
                lines = data.split(b"\n")
                last = lines.pop()
                if lines:
                    if tail:
                        lines[0] = bytes(tail) + lines[0]
                        tail.clear()
                    if not self._hand_over(lines):
                        return
                tail += last
            if tail and not self._stopped.is_set():
                self._hand_over([bytes(tail)])
            self._hand_over(None)
        except OSError as err:  # an unreadable input ends the run with that error
            self._hand_over(err)

    async def next_chunk(self) -> list[bytes] | None:
        """The next lines (without ``\\n``), or None at the end of the input.

        Raises:
            OSError: the input could not be read.
        """
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """Let the thread end after its current read (it is a daemon if the read blocks)."""
        self._stopped.set()
