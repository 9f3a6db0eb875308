"""The command-line tool as a new user meets it in the first hour: a master that is not there,
help text that reads on a terminal, exit statuses as documented, every command in the guide."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess

import pytest

from tests.support.cli_run import SOURCE_ROOT, cli_argv, cli_env
from tubemq_aio.cli import main
from tubemq_aio.cli._input import Outgoing, parse_json_line
from tubemq_aio.cli._inspect import _explained_424, format_table
from tubemq_aio.cli._parser import build_parser
from tubemq_aio.errors import ConfigError, ServerError, server_error
from tubemq_aio.testing._ports import allocate_ports

CLI_GUIDE = SOURCE_ROOT / "docs" / "cli.md"


def _free_address() -> str:
    return f"127.0.0.1:{allocate_ports(1)[0]}"


@pytest.mark.parametrize("command", [["partitions"], ["lag", "--group", "g1"]])
def test_an_unreachable_master_says_what_to_do_and_where_the_address_came_from(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error was only ``ConnectError: cannot connect to ADDR: [Errno 111] ...``: nothing
    said that the address came from an exported ``$TUBEMQ_AIO_MASTER`` (a cluster started
    earlier, or one that took another port because 8715 was taken) nor how to find or start
    one."""
    address = _free_address()
    monkeypatch.setenv("TUBEMQ_AIO_MASTER", address)
    assert main([command[0], "--topic", "demo", *command[1:]]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert f"$TUBEMQ_AIO_MASTER={address}" in err[0]
    assert "tubemq-aio cluster status" in err[0]
    assert "tubemq-aio cluster up --fake" in err[0]

    monkeypatch.delenv("TUBEMQ_AIO_MASTER")
    assert main([command[0], "--master", address, "--topic", "demo", *command[1:]]) == 1
    err = capsys.readouterr().err.splitlines()
    assert f"--master {address}" in err[0]
    assert "$TUBEMQ_AIO_MASTER" not in err[0]


async def _count_connects(server_ready: asyncio.Event, counts: list[int], port: int) -> None:
    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.append(1)
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", port)
    async with server:
        server_ready.set()
        await asyncio.Event().wait()


async def _connects_of(argv: list[str]) -> int:
    """How many connections ``tubemq-aio ARGV`` opens to a master that drops each one."""
    port = allocate_ports(1)[0]
    counts: list[int] = []
    ready = asyncio.Event()
    serving = asyncio.create_task(_count_connects(ready, counts, port))
    try:
        await ready.wait()
        code = await asyncio.to_thread(main, [*argv, "--master", f"127.0.0.1:{port}"])
        assert code == 1
    finally:
        serving.cancel()
    return len(counts)


async def test_partitions_gives_up_on_a_silent_master_as_lag_does() -> None:
    """``partitions`` kept registering for the consumer's five-attempt window (about 5 s)
    against a master that dropped every connection, where ``lag`` and ``reset`` stop after one
    round: two read-only looks at one topic failed at different speeds."""
    lag = await _connects_of(["lag", "--topic", "demo", "--group", "g1"])
    partitions = await _connects_of(["partitions", "--topic", "demo"])
    assert lag >= 1
    assert partitions == lag


def _help_texts() -> dict[str, str]:
    parser = build_parser()
    texts = {"tubemq-aio": parser.format_help()}
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        for name, sub in getattr(action, "choices", {}).items():
            if sub.add_help:  # `cluster` hands its own --help to the testing CLI
                texts[name] = sub.format_help()
    return texts


@pytest.mark.parametrize("width", [80])
def test_help_lines_fit_a_terminal(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``consume --help`` printed its 500-character description as one line (its epilog keeps
    its own line breaks, and the description came out raw with it)."""
    monkeypatch.setenv("COLUMNS", str(width))
    long = {
        name: line
        for name, text in _help_texts().items()
        for line in text.splitlines()
        if len(line) > width + 20
    }
    assert long == {}


def test_every_command_is_in_the_guides_table_and_every_exit_status_is_documented() -> None:
    """``reset`` was missing from the command table of docs/cli.md; exit status 130 (Ctrl-C
    while connecting) was returned but documented nowhere."""
    guide = CLI_GUIDE.read_text(encoding="utf-8")
    table = [line for line in guide.splitlines() if line.startswith("| `")]
    commands = {m.group(1) for line in table if (m := re.match(r"\| `(\w+)", line))}
    assert commands == set(_help_texts()) - {"tubemq-aio"} | {"cluster"}
    epilog = _help_texts()["tubemq-aio"]
    for status in ("0", "1", "2", "130"):
        assert re.search(rf"\*\*{status}\*\*", guide), status
        assert re.search(rf"\b{status} ", epilog), status


@pytest.mark.system
def test_ctrl_c_while_connecting_exits_130() -> None:
    """The documented statuses did not include what a Ctrl-C before the work started
    returns. The master here accepts the connection and never answers: the signal comes while
    the command waits for its register call."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(60)
        port = silent.getsockname()[1]
        proc = subprocess.Popen(
            cli_argv(
                "consume", "--topic", "demo", "--group", "g1", "--master", f"127.0.0.1:{port}"
            ),
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            conn, _ = silent.accept()
            with conn:
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert err.decode().splitlines() == ["tubemq-aio: error: interrupted"]


def test_a_group_consumed_elsewhere_is_explained_before_the_servers_text() -> None:
    """``lag`` on a group with server-balanced consumers online printed the master's 190
    characters first (a generated consumer id, "client-rebalance subscribe is inconsistency
    with other consumers using unbound subscribe"), then what it means."""
    server_text = (
        "[Inconsistency subscribe] g1_127.0.0.1-22415-31154474662455-654162727-Balance-"
        "tubemq-aio-0.3.0.dev0 using client-rebalance subscribe is inconsistency with other "
        "consumers using unbound subscribe in the group"
    )
    with pytest.raises(ServerError) as caught, _explained_424("g1"):
        raise server_error(424, server_text)
    text = str(caught.value)
    assert caught.value.err_code == 424
    assert text.startswith("[424] group 'g1' has server-balanced consumers online")
    assert "stop them first" in text
    assert "Balance-tubemq-aio" not in text


def test_the_guides_cluster_up_line_shows_every_option_up_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/cli.md showed ``cluster up [--brokers 1|2]``: ``up`` takes 3 brokers, and
    ``--masters`` and ``--version`` were not shown."""
    with pytest.raises(SystemExit):
        main(["cluster", "up", "--help"])
    usage = capsys.readouterr().out
    options = set(re.findall(r"\[(--[\w-]+)", usage)) - {"--fake"}
    guide = CLI_GUIDE.read_text(encoding="utf-8")
    (line,) = re.findall(r"^`tubemq-aio cluster up \[[^\n]*", guide, re.M)
    assert options
    assert {o for o in options if o not in line} == set()
    brokers = re.search(r"--brokers \{([\d,]+)\}", usage)
    assert brokers is not None, usage
    assert f"--brokers {brokers.group(1).replace(',', '|')}" in line


def test_an_unreachable_web_api_is_reported_without_urllibs_wrapping(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``topics --web`` at a port nobody listens on said ``<urlopen error [Errno 111]
    Connection refused>``: the library's repr, not a sentence."""
    address = _free_address()
    assert main(["topics", "--web", address]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "<urlopen error" not in line
    assert f"master web API at {address}: [Errno 111] Connection refused" in line
    assert "--web" in line


def test_a_json_line_without_a_body_says_so() -> None:
    """``{"nobody": 1}`` was refused with ``"body" must be a str, got NoneType``."""
    with pytest.raises(ConfigError) as caught:
        parse_json_line(b'{"nobody": 1}\n', Outgoing(b"", {}, None, None, None))
    assert 'no "body"' in str(caught.value)
    assert "NoneType" not in str(caught.value)


#: The table headers of docs/cli.md's transcripts, as the commands print them (``reset`` has
#: an unnamed arrow column and an unnamed note column).
_TABLE_COLUMNS: dict[tuple[str, ...], list[str]] = {
    ("partition", "old", "new"): ["partition", "old", "", "new", ""],
}


def _transcript_tables(text: str) -> list[list[str]]:
    """Each run of lines of a ``console`` block that starts with a table header."""
    tables: list[list[str]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith(("$ ", "dry run")) or not line.strip():
                current = None
            elif current is None and re.match(r"(partition|topic|group)  ", line):
                current = [line]
                tables.append(current)
            elif current is not None:
                current.append(line)
    return tables


def test_the_guides_tables_are_laid_out_as_the_commands_print_them() -> None:
    """The ``lag`` and ``reset`` transcripts in docs/cli.md had their numbers left-aligned under
    left-aligned titles; the commands right-align numeric columns (the transcripts are run by
    the docs test, their output is not compared)."""
    tables = _transcript_tables(CLI_GUIDE.read_text(encoding="utf-8"))
    assert len(tables) >= 4
    for lines in tables:
        header = lines[0].split()
        columns = _TABLE_COLUMNS.get(tuple(header), header)
        rows: list[list[object]] = []
        for line in lines[1:]:
            cells: list[object] = [int(c) if c.isdigit() else c for c in line.split()]
            rows.append(cells + [""] * (len(columns) - len(cells)))
        assert format_table(columns, rows).splitlines() == lines
