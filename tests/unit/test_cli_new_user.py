"""A new user's slips on the command line, and an output that fails: each is one line on
stderr naming the problem and a nonzero exit, never a traceback or a hang."""

from __future__ import annotations

import asyncio
import errno
import io
import sys
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from tubemq_aio.cli import main
from tubemq_aio.cli._consume import _Output
from tubemq_aio.cli._parser import parse_arguments


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--master", "127.0.0.1:8715", "partitions", "--topic", "demo"], "--master"),
        (["--master=127.0.0.1:8715", "lag", "--topic", "demo", "--group", "g1"], "--master"),
        (["-vq", "--topic", "demo", "partitions", "--master", "m:1"], "--topic"),
        (["-v", "--tls-ca", "ca.pem", "consume", "--topic", "t", "--group", "g1"], "--tls-ca"),
    ],
)
def test_a_command_option_before_the_command_says_where_it_goes(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tubemq-aio --master M partitions ...`` said ``invalid choice: 'M'`` for the command,
    the address taken for a command name."""
    with pytest.raises(SystemExit) as exc:
        parse_arguments(argv)
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tubemq-aio: error: {option} goes after the command name"), line


def test_verbosity_before_the_command_is_still_taken() -> None:
    args = parse_arguments(["-vv", "-q", "partitions", "--master", "m:1", "--topic", "t"])
    assert (args.command, args.verbose, args.quiet) == ("partitions", 2, True)


@pytest.mark.parametrize("offset", [str(2**63), "1" * 30])
def test_an_offset_over_int64_is_refused_as_the_option(
    offset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It passed the parser and failed later as ``bootstrap offset: offset must be ...``, a
    name the user never gave."""
    argv = ["consume", "--master", "m:1", "--topic", "t", "--partition", "all", "--offset", offset]
    with pytest.raises(SystemExit) as exc:
        parse_arguments(argv)
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"argument --offset: '{offset}' must be at most {2**63 - 1}" in line


def test_the_largest_offset_is_taken() -> None:
    argv = ["consume", "--master", "m:1", "--topic", "t", "--partition", "all"]
    assert parse_arguments([*argv, "--offset", str(2**63 - 1)]).offset == 2**63 - 1


@pytest.fixture
def full_disk() -> Iterator[BinaryIO]:
    """A file whose every write fails with ENOSPC, as on a full disk."""
    with open("/dev/full", "wb") as full:
        yield full


async def test_a_failing_write_of_consume_is_an_error_not_a_hang(full_disk: BinaryIO) -> None:
    """``consume ... > /dev/full``: the output thread died with a traceback on ENOSPC and the
    command waited for its write for ever (nothing acked, nothing said)."""
    output = _Output(full_disk)
    try:
        async with asyncio.timeout(30):
            with pytest.raises(OSError, match="No space left") as exc:
                await output.write(b"x\n" * 10_000, asyncio.Event())
    finally:
        output.close()
    assert exc.value.errno == errno.ENOSPC


async def test_a_failing_write_of_a_stream_without_a_descriptor_is_an_error() -> None:
    class Broken(io.BytesIO):
        def write(self, data: object, /) -> int:
            raise OSError(errno.EIO, "I/O error")

    output = _Output(Broken())
    try:
        async with asyncio.timeout(30):
            with pytest.raises(OSError, match="I/O error"):
                await output.write(b"x\n", asyncio.Event())
    finally:
        output.close()


@pytest.mark.parametrize(
    ("argv", "stream", "words"),
    [
        (["consume", "--master", "m:1", "--topic", "t", "--group", "g1"], "stdout", "output"),
        (["partitions", "--master", "m:1", "--topic", "t"], "stdout", "output"),
        (["produce", "--master", "m:1", "--topic", "t"], "stdin", "input"),
        (["produce", "--master", "m:1", "--topic", "t", "-"], "stdin", "input"),
    ],
)
def test_a_closed_standard_stream_is_a_usage_error(
    argv: list[str],
    stream: str,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``tubemq-aio produce ... <&-`` (or ``consume ... >&-``) ended in an AttributeError
    traceback: Python sets a stream the process was started without to None."""
    monkeypatch.setattr(sys, stream, None)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tubemq-aio: error: standard {words} is closed"), line
