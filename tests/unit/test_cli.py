"""The command-line tool's pure parts: input lines, output JSON, tables, argument checks."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from datetime import datetime
from pathlib import Path

import pytest

from tubemq_aio.auth import Credentials
from tubemq_aio.cli import main
from tubemq_aio.cli._common import parse_attrs
from tubemq_aio.cli._connect import connection_options, open_client
from tubemq_aio.cli._consume import message_json
from tubemq_aio.cli._input import LineReader, Outgoing, parse_json_line, parse_text_line
from tubemq_aio.cli._inspect import format_table, lag_rows
from tubemq_aio.cli._listing import group_rows, topic_rows, web_endpoint
from tubemq_aio.cli._parser import build_parser
from tubemq_aio.cli._produce import _Pacer
from tubemq_aio.consumer import PartitionPosition
from tubemq_aio.errors import ConfigError
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer
from tubemq_aio.testing._ports import allocate_ports

DEFAULTS = Outgoing(b"", {"src": "cli"}, "t1", None, "k")


def test_text_line_is_the_body_with_the_command_line_options() -> None:
    out = parse_text_line(b"hello world\r\n", DEFAULTS)
    assert out == Outgoing(b"hello world", {"src": "cli"}, "t1", None, "k")
    assert parse_text_line(b"\n", DEFAULTS) is None
    assert parse_text_line(b"", DEFAULTS) is None


def test_json_line_overrides_defaults_and_decodes_base64() -> None:
    line = json.dumps(
        {
            "body": base64.b64encode(b"\xff\x00").decode(),
            "body_encoding": "base64",
            "attributes": {"a": "1"},
            "msg_type": "t2",
            "msg_time": "202601021530",
            "topic": "ignored",
            "message_id": 5,
        }
    )
    out = parse_json_line(line.encode() + b"\n", DEFAULTS)
    assert out == Outgoing(b"\xff\x00", {"src": "cli", "a": "1"}, "t2", "202601021530", "k")
    iso = parse_json_line(b'{"body": "x", "msg_time": "2026-01-02T15:30:00"}', DEFAULTS)
    assert iso is not None
    assert iso.msg_time == datetime(2026, 1, 2, 15, 30)
    assert parse_json_line(b"  \n", DEFAULTS) is None


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"attributes": {}}', '"body"'),
        (b'{"body": 3}', '"body"'),
        (b'{"body": "!!", "body_encoding": "base64"}', "base64"),
        (b'{"body": "x", "body_encoding": "rot13"}', "body_encoding"),
        (b'{"body": "x", "attributes": {"a": 1}}', "attributes"),
        (b'{"body": "x", "msg_type": 7}', "msg_type"),
        (b'{"body": "x", "msg_time": "yesterday"}', "msg_time"),
        # were tracebacks: a lone surrogate cannot be UTF-8, nesting beyond the recursion limit
        (b'{"body": "\\udc00"}', '"body"'),
        (b'{"body": "x", "key": "\\ud800"}', '"key"'),
        (b'{"body": "x", "msg_type": "\\ud800"}', '"msg_type"'),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_bad_json_lines_name_the_problem(line: bytes, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_json_line(line, DEFAULTS)


def test_message_json_falls_back_to_base64_for_binary_bodies() -> None:
    when = datetime(2026, 1, 2, 3, 4)
    msg = Message(
        topic="t",
        body="grüß".encode(),
        attributes={"k": "v"},
        msg_type="x",
        msg_time=when,
        message_id=9,
        partition_key="1:t:0",
    )
    assert message_json(msg) == {
        "topic": "t",
        "partition_key": "1:t:0",
        "message_id": "9",
        "msg_type": "x",
        "msg_time": "2026-01-02T03:04:00",
        "attributes": {"k": "v"},
        "body": "grüß",
        "body_encoding": "utf-8",
    }
    binary = message_json(Message(topic="t", body=b"\xff\xfe"))
    assert binary["body_encoding"] == "base64"
    assert base64.b64decode(binary["body"]) == b"\xff\xfe"
    assert binary["msg_time"] is None
    # What consume prints, produce --json reads back to the same message.
    back = parse_json_line(json.dumps(binary).encode(), Outgoing(b""))
    assert back is not None
    assert back.body == b"\xff\xfe"


async def test_the_rate_pacer_sends_the_first_line_at_once_and_gives_way_to_a_stop() -> None:
    """``--rate 0.01`` held the first line for 100 s, and Ctrl-C/SIGTERM (which set ``stop``)
    went unanswered until the next line was due."""
    stop = asyncio.Event()
    pacer = _Pacer(0.01)  # a line per 100 s
    await asyncio.wait_for(pacer.wait(stop), 5)
    second = asyncio.ensure_future(pacer.wait(stop))
    await asyncio.sleep(0.05)
    assert not second.done()  # paced
    stop.set()
    await asyncio.wait_for(second, 5)


def test_attrs_need_key_and_value() -> None:
    assert parse_attrs(["a=1", "b=x", "a=2"]) == {"a": "2", "b": "x"}
    assert parse_attrs(None) == {}
    for bad in ("novalue", "=v"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_attrs([bad])
    # what no message may carry was taken here and refused by every send
    for bad in ("c=", "b=x=y", "a=b,c", "$msgTime$=1", "k=a$msgType$"):
        with pytest.raises(ConfigError, match=re.escape(f"--attr {bad!r}: attributes: ")):
            parse_attrs([bad])


def test_table_aligns_numbers_right() -> None:
    positions = [PartitionPosition("1:t:0", 28, 280, 9), PartitionPosition("2:t:10", 0, 28, 1)]
    rows = [list(row.values()) for row in lag_rows(positions)]
    assert format_table(["partition", "offset", "max", "lag"], rows) == (
        "partition  offset  max  lag\n1:t:0          28  280    9\n2:t:10          0   28    1\n"
    )
    assert format_table(["a"], []) == "a\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "--topic", "t"],
        ["produce", "--master", "m:1", "--topic", "t", "--rate", "inf"],
        ["produce", "--master", "m:1", "--topic", "t", "--rate", "-1"],
        ["produce", "--master", "m:1", "--topic", "t", "--concurrency", "0"],
        # a task per slot: 10^8 took gigabytes before the first line was read
        ["produce", "--master", "m:1", "--topic", "t", "--concurrency", "100000000"],
        # a non-UTF-8 argument (decoded with surrogateescape) was a traceback from the key hash
        ["produce", "--master", "m:1", "--topic", "t", "--key", "\udced"],
        ["produce", "--master", "m:1", "--topic", "t", "--msg-type", "\udced"],
        ["produce", "--master", "m:1", "--topic", "t", "/"],  # a directory: was exit 1
        # attributes and types no message may carry: every line failed, exit 1
        ["produce", "--master", "m:1", "--topic", "t", "--attr", "a=b,c"],
        ["produce", "--master", "m:1", "--topic", "t", "--attr", "b=x=y"],
        ["produce", "--master", "m:1", "--topic", "t", "--attr", "$msgType$=x"],
        ["produce", "--master", "m:1", "--topic", "t", "--msg-type", "a,b"],
        ["produce", "--master", "m:1", "--topic", "t", "--msg-type", "x$msgTime$"],
        ["consume", "--master", "m:1", "--topic", "t", "--group", "g", "--timeout", "nan"],
        ["consume", "--master", "m:1", "--topic", "t", "--group", "g", "--format", "xml"],
        ["lag", "--master", "m:1", "--topic", "t"],
        ["consume", "--master", "m:1", "--topic", "t"],
        ["consume", "--master", "m:1", "--topic", "t", "--group", "g", "--finish-batch"],
        ["consume", "--master", "m:1", "--topic", "t", "--group", "g", "--offset", "3"],
        ["consume", "--master", "m:1", "--topic", "t", "--partition", "all", "--offset", "-1"],
        ["consume", "--master", "m:1", "--topic", "t", "--partition", "all", "--offset", "x"],
        ["consume", "--master", "m:1", "--topic", "t", "--partition", "all", "--offset", "nan"],
        ["produce", "--master", "m:1", "--topic", "t", "/no/such/file"],
        ["nope"],
        [],
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)  # a bad input file is found after parsing: returned, not raised
    except SystemExit as exc:  # argparse's own checks
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("tubemq-aio: error: ")


def test_master_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_MASTER", "127.0.0.1:8715")
    with pytest.raises(SystemExit) as exc:
        main(["consume", "--topic", "t", "--group", "g", "--help"])
    assert exc.value.code == 0
    assert "$TUBEMQ_AIO_MASTER" in capsys.readouterr().out


async def test_line_reader_splits_chunks_and_keeps_a_last_line_without_newline() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"a\nbb\n\nccc")
    os.close(write_fd)
    reader = LineReader(read_fd)
    lines: list[bytes] = []
    try:
        while (chunk := await reader.next_chunk()) is not None:
            lines.extend(chunk)
    finally:
        reader.stop()
        os.close(read_fd)
    assert lines == [b"a", b"bb", b"", b"ccc"]


async def _read_all(fd: int) -> list[bytes]:
    reader = LineReader(fd)
    lines: list[bytes] = []
    try:
        while (chunk := await reader.next_chunk()) is not None:
            lines.extend(chunk)
    finally:
        reader.stop()
    return lines


@pytest.mark.timeout(60)
async def test_a_long_line_is_read_in_linear_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read was joined to the whole line so far (``tail + data``): a 60 MB file without a
    newline took 33 s to be refused as too large, 20 MB 4 s. With 64-byte reads this 4 MB line
    would copy about 128 GB that way (the timeout ends it); now each byte is copied once or
    twice."""
    monkeypatch.setattr("tubemq_aio.cli._input.READ_SIZE", 64)
    path = tmp_path / "long"
    path.write_bytes(b"x" * 4_000_000 + b"\nend\n\n" + b"y" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = await _read_all(fd)
    finally:
        os.close(fd)
    assert [len(line) for line in lines] == [4_000_000, 3, 0, 100]
    assert lines[1] == b"end"


async def test_lines_split_across_reads_come_out_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tubemq_aio.cli._input.READ_SIZE", 3)
    path = tmp_path / "split"
    path.write_bytes(b"ab\ncd\n\nefgh\nij")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert await _read_all(fd) == [b"ab", b"cd", b"", b"efgh", b"ij"]
    finally:
        os.close(fd)


SECRET = "pa55-never-shown"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--password", SECRET], "--password needs --user"),
        (["--user", "bob"], "--user needs a password"),
        (["--tls-key", "k.pem"], "--tls-key needs --tls-cert"),
        (["--tls-ca", "/no/such/ca.pem", "--user", "bob", "--password", SECRET], "--tls-ca"),
        (["--tls-cert", "/no/such/c.pem", "--user", "bob", "--password", SECRET], "--tls-cert"),
    ],
)
def test_connection_option_mistakes_exit_2_without_the_password(
    extra: list[str],
    problem: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TUBEMQ_AIO_PASSWORD", raising=False)
    assert main(["partitions", "--master", "127.0.0.1:1", "--topic", "t", *extra]) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert SECRET not in err


@pytest.mark.parametrize(
    ("master", "problem"),
    [
        ("http://127.0.0.1:1", "unknown scheme http://"),
        (f"tubemq://bob@{'127.0.0.1:1'}", "user:password"),
        (f"tubemq://bob:{SECRET}@127.0.0.1:1?nope=1", "unknown option"),
    ],
)
def test_bad_master_urls_exit_2_without_the_password(
    master: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["partitions", "--master", master, "--topic", "t"]) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert SECRET not in err


def test_password_from_the_environment_is_used_and_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_PASSWORD", SECRET)
    args = build_parser().parse_args(
        ["partitions", "--master", "h:1", "--topic", "t", "--user", "bob"]
    )
    options = connection_options(args)
    assert options["credentials"] == Credentials("bob", SECRET)
    assert "ssl_context" not in options
    producer = open_client(Producer, args, topics=["t"])
    assert SECRET not in repr(producer)
    assert SECRET not in repr(producer.config)
    url = build_parser().parse_args(
        ["partitions", "--master", f"tubemqs://bob:{SECRET}@h:1", "--topic", "t"]
    )
    from_url = open_client(Producer, url, topics=["t"])
    assert from_url.config.credentials == Credentials("bob", SECRET)
    assert from_url.config.ssl_context is not None
    assert SECRET not in repr(from_url.config)


def test_web_endpoint_comes_from_web_or_the_master_host() -> None:
    assert web_endpoint("10.0.0.5:8081", None) == ("10.0.0.5", 8081)
    assert web_endpoint("http://m1:9090/webapi.htm", "x:1") == ("m1", 9090)
    assert web_endpoint(None, "m2:8715,m3:8715") == ("m2", 8080)
    assert web_endpoint(None, f"tubemqs://bob:{SECRET}@m4:8715?tls=true") == ("m4", 8080)
    for web, master in ((None, None), ("h:notaport", None), ("ftp://h:1", None)):
        with pytest.raises(ConfigError) as info:
            web_endpoint(web, master)
        assert SECRET not in str(info.value)


def test_listing_rows_from_web_api_items() -> None:
    topics = topic_rows(
        [
            {
                "topicName": "b",
                "totalCfgNumPart": 6,
                "totalRunNumPartCount": 3,
                "isSrvAcceptPublish": True,
                "isSrvAcceptSubscribe": False,
            },
            {"topicName": "a"},
        ]
    )
    assert topics == [
        {
            "topic": "a",
            "partitions": 0,
            "running_partitions": 0,
            "publish": False,
            "subscribe": False,
        },
        {
            "topic": "b",
            "partitions": 6,
            "running_partitions": 3,
            "publish": True,
            "subscribe": False,
        },
    ]
    groups = group_rows([{"consumeGroup": "g", "topicSet": ["t2", "t1"], "consumerNum": 2}])
    assert groups == [{"group": "g", "topics": ["t1", "t2"], "consumers": 2}]


def test_listing_without_a_web_api_exits_1_naming_the_address(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (port,) = allocate_ports(1)
    assert main(["topics", "--web", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert f"master web API at 127.0.0.1:{port}" in err[0]
    monkeypatch.delenv("TUBEMQ_AIO_MASTER", raising=False)
    monkeypatch.delenv("TUBEMQ_AIO_MASTER_WEB", raising=False)
    monkeypatch.setenv("TUBEMQ_AIO_STATE", os.devnull)  # no `cluster up` record either
    assert main(["groups"]) == 2
    assert "--web HOST:PORT" in capsys.readouterr().err


@pytest.mark.parametrize("master", ["h:1", "tubemq://h:1?framing=standard"])
def test_framing_flag_reaches_the_client_and_overrides_the_url(master: str) -> None:
    args = build_parser().parse_args(
        ["partitions", "--master", master, "--topic", "t", "--framing", "legacy-length"]
    )
    assert connection_options(args) == {"framing": "legacy-length"}
    assert open_client(Producer, args, topics=["t"]).config.framing == "legacy-length"
    plain = build_parser().parse_args(["partitions", "--master", "h:1", "--topic", "t"])
    assert "framing" not in connection_options(plain)


def test_unknown_framing_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["partitions", "--master", "h:1", "--topic", "t", "--framing", "legacy"])
    assert info.value.code == 2
    assert "legacy-length" in capsys.readouterr().err
