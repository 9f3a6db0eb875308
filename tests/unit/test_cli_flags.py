"""The command line as a newcomer types it: ``-v``/``-q`` on either side of the command, a
missing master named by its variable, and ``topics``/``groups`` through the SDK's web API client
(``tubemq_aio.admin``), without the servers' internal topic unless asked."""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

import tubemq_aio
from tubemq_aio.admin import MasterWebApi
from tubemq_aio.cli import main
from tubemq_aio.cli._parser import NEEDS_MASTER, build_parser, parse_arguments
from tubemq_aio.errors import AdminApiError, ConfigError
from tubemq_aio.testing.cluster import is_recorded_fake, recorded_web_api

TOPICS = [
    {
        "topicName": "demo",
        "totalCfgNumPart": 3,
        "totalRunNumPartCount": 3,
        "isSrvAcceptPublish": True,
        "isSrvAcceptSubscribe": True,
    },
    {
        "topicName": "__offset_history__",
        "totalCfgNumPart": 1,
        "totalRunNumPartCount": 1,
        "isSrvAcceptPublish": True,
        "isSrvAcceptSubscribe": True,
    },
]
CONSUME = ["consume", "--master", "m:1", "--topic", "t", "--group", "g"]


@pytest.mark.parametrize(
    ("argv", "verbose", "quiet"),
    [
        (CONSUME, 0, False),
        (["-v", *CONSUME], 1, False),
        ([*CONSUME, "-v"], 1, False),
        (["-v", *CONSUME, "-v"], 2, False),
        ([*CONSUME, "-vv"], 2, False),
        (["-q", *CONSUME], 0, True),
        ([*CONSUME, "-q"], 0, True),
        (["-q", "topics", "--web", "h:1", "-v"], 1, True),
    ],
)
def test_verbose_and_quiet_before_or_after_the_command(
    argv: list[str], verbose: int, quiet: bool
) -> None:
    args = parse_arguments(argv)
    assert (args.verbose, args.quiet) == (verbose, quiet)
    assert not hasattr(args, "sub_verbose")
    assert not hasattr(args, "sub_quiet")


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "--topic", "t"],
        ["consume", "--topic", "t", "--group", "g"],
        ["partitions", "--topic", "t"],
        ["lag", "--topic", "t", "--group", "g"],
        # reset was a traceback: AttributeError: 'NoneType' object has no attribute 'startswith'
        ["reset", "--topic", "t", "--group", "g", "--to-time", "2026-11-29T10:00:00Z"],
    ],
)
def test_a_missing_master_names_the_variable(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TUBEMQ_AIO_MASTER", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--master" in line
    assert "$TUBEMQ_AIO_MASTER" in line


@pytest.mark.parametrize(
    "argv",
    [
        [*CONSUME[:5], "--partition", "all", "--offset", "@9999-12-31T23:59:59-14:00", "-e"],
        [*CONSUME, "--from", "@0001-01-01T00:00:00+14:00"],
        [
            "reset",
            "--master",
            "m:1",
            "--topic",
            "t",
            "--group",
            "g",
            "--to-time",
            "9999-12-31T12:00Z",
        ],
    ],
)
def test_a_time_at_the_ends_of_the_datetime_range_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a time overflowed converting it to --msg-time-zone: a traceback, exit 1."""
    with pytest.raises(SystemExit) as exc:
        parse_arguments(argv)
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "between 0001-01-02 and 9999-12-30" in line


def test_the_master_variable_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_MASTER", "10.1.1.1:8715")
    assert parse_arguments(["partitions", "--topic", "t"]).master == "10.1.1.1:8715"


class _WebApi(BaseHTTPRequestHandler):
    """A master's ``/webapi.htm`` answering the two listing queries."""

    def do_POST(self) -> None:
        params = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        method = params["method"][0]
        if method == "admin_query_topic_info":
            reply = {"result": True, "errCode": 0, "errMsg": "OK", "data": TOPICS}
        elif method == "admin_query_sub_info":
            data = [{"consumeGroup": "g1", "topicSet": ["demo"], "consumerNum": 1}]
            reply = {"result": True, "errCode": 0, "errMsg": "OK", "data": data}
        else:
            reply = {"result": False, "errCode": 400, "errMsg": f"unknown {method}"}
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    """``host:port`` of a fake master web API."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WebApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_topics_hides_the_internal_topic_unless_asked(
    web: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topics", "--web", web, "--format", "json"]) == 0
    assert [r["topic"] for r in json.loads(capsys.readouterr().out)] == ["demo"]
    assert main(["topics", "--web", web, "--format", "json", "--all"]) == 0
    shown = [r["topic"] for r in json.loads(capsys.readouterr().out)]
    assert shown == ["__offset_history__", "demo"]
    assert main(["groups", "--web", web, "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["g1", "demo", "1"]


async def test_the_sdk_web_api_client_checks_the_envelope(web: str) -> None:
    host, port = web.rsplit(":", 1)
    api = MasterWebApi(host, int(port))
    topics = await api.query("admin_query_topic_info")
    assert [t["topicName"] for t in topics] == ["demo", "__offset_history__"]
    with pytest.raises(AdminApiError, match="unknown nope"):
        await api.query("nope")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"web_port": 0},
        {"web_port": 70000},
        {"web_port": True},
        {"web_port": 8080, "timeout": 0},
        {"web_port": 8080, "timeout": float("nan")},
        {"web_port": 8080, "timeout": float("inf")},
    ],
)
def test_the_sdk_web_api_client_refuses_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        MasterWebApi("h", **kwargs)  # type: ignore[arg-type]


async def test_an_unreachable_web_api_is_an_admin_api_error() -> None:
    from tubemq_aio.testing._ports import allocate_ports

    (port,) = allocate_ports(1)
    with pytest.raises(AdminApiError, match=f"127.0.0.1:{port}"):
        await MasterWebApi("127.0.0.1", port, timeout=5).query("admin_query_topic_info")


def test_topics_finds_the_web_api_in_the_state_of_cluster_up(
    web: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "cluster.json"
    record = {"master_addr": "127.0.0.1:8715", "master_web": f"http://{web}/webapi.htm"}
    state.write_text(json.dumps(record))
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(state))
    monkeypatch.delenv("TUBEMQ_AIO_MASTER_WEB", raising=False)
    monkeypatch.delenv("TUBEMQ_AIO_MASTER", raising=False)
    assert recorded_web_api() == web
    assert recorded_web_api("127.0.0.1:8715") == web
    assert recorded_web_api("10.0.0.1:8715") is None  # another cluster: not this record
    assert main(["topics", "--format", "json"]) == 0
    assert [r["topic"] for r in json.loads(capsys.readouterr().out)] == ["demo"]
    assert main(["topics", "--master", "127.0.0.1:8715", "--format", "json"]) == 0
    assert [r["topic"] for r in json.loads(capsys.readouterr().out)] == ["demo"]
    state.write_text("{not json")
    assert recorded_web_api() is None


@pytest.mark.parametrize("module", ["tubemq_aio", "tubemq_aio.cli"])
def test_the_tool_runs_as_a_module(
    module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `python -m tubemq_aio.cli` was "No module named tubemq_aio.cli.__main__".
    monkeypatch.setattr(sys, "argv", [module, "--version"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exc.value.code == 0
    assert capsys.readouterr().out.split() == ["tubemq-aio", tubemq_aio.__version__]


@pytest.mark.parametrize("command", ["topics", "groups"])
def test_topics_against_the_recorded_fake_says_it_has_no_web_api(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It guessed the master's host at port 8080: a refused connection, or another cluster's list.
    state = tmp_path / "cluster.json"
    state.write_text(json.dumps({"kind": "fake", "master_addr": "127.0.0.1:8715"}))
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(state))
    monkeypatch.delenv("TUBEMQ_AIO_MASTER_WEB", raising=False)
    monkeypatch.delenv("TUBEMQ_AIO_MASTER", raising=False)
    assert is_recorded_fake()
    assert is_recorded_fake("127.0.0.1:8715")
    assert not is_recorded_fake("10.0.0.1:8715")
    for argv in ([command], [command, "--master", "127.0.0.1:8715"]):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert "fake cluster (`cluster up --fake`) has no web API" in line
        assert f"list {command}" in line


def test_topics_with_web_given_asks_it_even_beside_a_recorded_fake(
    web: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "cluster.json"
    state.write_text(json.dumps({"kind": "fake", "master_addr": "127.0.0.1:8715"}))
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(state))
    assert main(["topics", "--master", "127.0.0.1:8715", "--web", web, "--format", "json"]) == 0
    assert [r["topic"] for r in json.loads(capsys.readouterr().out)] == ["demo"]
    state.write_text(json.dumps({"master_addr": "127.0.0.1:8715"}))  # a real record: not a fake
    assert not is_recorded_fake()


@pytest.mark.parametrize(
    ("argv", "rest", "quiet"),
    [
        (["cluster", "status"], ["status"], False),
        (["cluster", "status", "-v"], ["status"], False),
        (["-v", "cluster", "status"], ["status"], False),
        (["cluster", "-q", "up", "--fake"], ["up", "--fake"], True),
        (["-q", "cluster", "up", "--topic", "demo:3", "-vv"], ["up", "--topic", "demo:3"], True),
        (["cluster", "up", "--quiet", "--verbose"], ["up"], True),
    ],
)
def test_cluster_takes_verbose_and_quiet_on_either_side(
    argv: list[str], rest: list[str], quiet: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tubemq-aio cluster status -v` was "unrecognized arguments: -v".
    import tubemq_aio.testing.cluster as cluster

    calls: list[tuple[list[str], bool]] = []

    def record(args: list[str], prog: str, *, quiet: bool = False) -> int:
        calls.append((args, quiet))
        return 0

    monkeypatch.setattr(cluster, "main", record)
    assert main(argv) == 0
    assert calls == [(rest, quiet)]


def test_cluster_status_with_a_flag_after_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(tmp_path / "none.json"))
    assert main(["cluster", "status", "-v"]) == 1  # no cluster: 1, not the usage error 2
    assert "no cluster running" in capsys.readouterr().out


def test_every_command_with_a_client_connection_needs_the_master() -> None:
    # `reset` talks to the master's client port but was left out: it failed with a traceback.
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    clients = {
        name
        for name, command in sub.choices.items()
        if any("--tls-ca" in action.option_strings for action in command._actions)
    }
    assert clients == set(NEEDS_MASTER)
