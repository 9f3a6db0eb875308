"""A new user's slips on the command line: each is one line on stderr naming the fix, exit 2."""

from __future__ import annotations

import pytest

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
