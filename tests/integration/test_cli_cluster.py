"""The ``tubemq-aio`` command-line tool end to end: subprocesses against the real cluster."""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
from pathlib import Path

from tests.support.cli_run import CALL_TIMEOUT, cli_argv, cli_env, run_cli, sigterm_after_first_line
from tubemq_aio.testing import LocalCluster

COUNT = 120
#: Keeps the records with the documented field types and prints their kind.
JQ_FILTER = (
    'select((.message_id|type=="string") and (.attributes|type=="object") and .topic'
    ' and .partition_key and (.body|type=="string")) | [.msg_type, .body_encoding]'
)
#: Bodies that are not UTF-8 travel as base64 and must come back byte for byte.
BINARY = [bytes([0xFF, 0x00, i, 0x80]) for i in range(3)]


def _input_lines() -> list[bytes]:
    return [f"line {i} ü".encode() for i in range(COUNT)]


def _one_error_line(stderr: bytes) -> str:
    lines = stderr.decode().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tubemq-aio: error: "), lines[0]
    return lines[0]


def test_produce_pipe_consume_round_trip(
    cluster: LocalCluster, topic: str, second_topic: str, tmp_path: Path
) -> None:
    """produce lines → consume as JSON | produce --json (a copy) → consume raw: same bodies."""
    master = cluster.master_addr
    text = b"\n".join(_input_lines()) + b"\n\n"  # a trailing empty line is skipped
    done = run_cli(
        *shlex.split(f"produce --master {master} --topic {topic} --attr src=cli --msg-type t1"),
        stdin=text,
    )
    assert done.returncode == 0, done.stderr
    assert f"sent {COUNT} messages to {topic}, 0 failed, 1 empty lines skipped" in (
        done.stderr.decode()
    )
    binary = b"".join(
        json.dumps({"body": base64.b64encode(b).decode(), "body_encoding": "base64"}).encode()
        + b"\n"
        for b in BINARY
    )
    done = run_cli("produce", "--master", master, "--topic", topic, "--json", stdin=binary)
    assert done.returncode == 0, done.stderr
    total = COUNT + len(BINARY)

    copied = tmp_path / "copied.jsonl"
    consume = cli_argv(
        *shlex.split(
            f"consume --master {master} --topic {topic} --group cli_pipe "
            f"--from earliest --count {total} --timeout 90"
        ),
    )
    produce = cli_argv("produce", "--master", master, "--topic", second_topic, "--json")
    pipeline = f"{shlex.join(consume)} | tee {shlex.quote(str(copied))} | {shlex.join(produce)}"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline],
        capture_output=True,
        env=cli_env(),
        timeout=2 * CALL_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert f"sent {total} messages to {second_topic}, 0 failed" in done.stderr.decode()

    # Every printed line is a JSON object jq accepts, with the documented fields.
    check = subprocess.run(
        ["jq", "-e", "-c", JQ_FILTER, str(copied)], capture_output=True, timeout=30
    )
    assert check.returncode == 0, check.stderr
    kinds = [json.loads(line) for line in check.stdout.splitlines()]
    assert len(kinds) == total
    assert kinds.count(["t1", "utf-8"]) == COUNT
    assert kinds.count(["", "base64"]) == len(BINARY)
    records = [json.loads(line) for line in copied.read_text(encoding="utf-8").splitlines()]
    assert {r["topic"] for r in records} == {topic}
    assert all(r["attributes"] == {"src": "cli"} for r in records if r["msg_type"] == "t1")

    done = run_cli(
        *shlex.split(
            f"consume --master {master} --topic {second_topic} --group "
            f"cli_copy --from earliest --count {total} --timeout 90 "
            "--format json"
        ),
    )
    assert done.returncode == 0, done.stderr
    back = [json.loads(line) for line in done.stdout.splitlines()]
    bodies = sorted(
        base64.b64decode(r["body"]) if r["body_encoding"] == "base64" else r["body"].encode()
        for r in back
    )
    assert bodies == sorted(_input_lines() + BINARY)
    assert all(r["attributes"] == {"src": "cli"} for r in back if r["msg_type"] == "t1")

    # The copy group read everything: no lag left on any partition; a new group lags.
    done = run_cli("lag", "--master", master, "--topic", second_topic, "--group", "cli_copy")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.decode().splitlines()]
    assert rows[0] == ["partition", "offset", "max", "lag"]
    assert len(rows) == 1 + len(cluster.brokers) * 3
    assert all(int(r[3]) == 0 and int(r[1]) == int(r[2]) > 0 for r in rows[1:])
    done = run_cli("lag", "--master", master, "--topic", second_topic, "--group", "cli_fresh")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.decode().splitlines()[1:]]
    # Partitions of a store share its index: each reports the store's messages as its lag.
    assert all(int(r[1]) == 0 and int(r[3]) == int(r[2]) // 28 > 0 for r in rows)


def test_partitions_lists_every_partition(cluster: LocalCluster, topic: str) -> None:
    """``partitions`` prints one row per partition on every broker."""
    done = run_cli("partitions", "--master", cluster.master_addr, "--topic", topic)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0].split() == ["partition", "broker", "id", "subscribable"]
    keys = {line.split()[0] for line in lines[1:]}
    brokers = {str(b.broker_id) for b in cluster.brokers}
    assert len(keys) == len(brokers) * 3
    assert {k.split(":")[0] for k in keys} == brokers
    assert {k.split(":")[1] for k in keys} == {topic}


def test_consume_ends_cleanly_on_sigterm(cluster: LocalCluster, topic: str) -> None:
    """A consume without limits prints as messages come and exits 0 on SIGTERM, no traceback."""
    master = cluster.master_addr
    done = run_cli("produce", "--master", master, "--topic", topic, stdin=b"a\nb\nc\n")
    assert done.returncode == 0, done.stderr
    first, out, err, code = sigterm_after_first_line(
        cli_argv(
            *shlex.split(
                f"consume --master {master} --topic {topic} --group cli_term "
                "--from earliest --format raw"
            ),
        )
    )
    assert first.rstrip(b"\n") in {b"a", b"b", b"c"}
    assert code == 0, err
    assert err == b""
    printed = [first, *out.splitlines(keepends=True)]
    assert len(set(printed)) == len(printed)
    assert set(printed) <= {b"a\n", b"b\n", b"c\n"}
    # What was printed was acked; the rest comes to the group's next member. It too starts
    # from earliest: the first member prints as soon as one broker's partitions answer, so the
    # SIGTERM may come before it registered at the other broker, where the group then has no
    # offset and a member starting from latest would skip what those partitions hold.
    rest = 3 - len(printed)
    if rest:
        done = run_cli(
            *shlex.split(
                f"consume --master {master} --topic {topic} --group cli_term "
                f"--from earliest --count {rest} --timeout 90 --format raw"
            ),
        )
        assert done.returncode == 0, done.stderr
        printed += done.stdout.splitlines(keepends=True)
    assert sorted(printed) == [b"a\n", b"b\n", b"c\n"]


def test_topics_groups_and_reading_to_the_end(cluster: LocalCluster, topic: str) -> None:
    """Against the real master and broker: ``--count 1 --finish-batch`` then ``-e`` of the same
    group print every message exactly once; ``--partition all --offset earliest -e -q`` reads
    everything again without a group; ``topics`` and ``groups`` list from the web API."""
    master, web = cluster.master_addr, cluster.web_api.url
    lines = [f"e{i}" for i in range(30)]
    done = run_cli(
        *shlex.split(f"produce --master {master} --topic {topic} -q"),
        stdin="".join(f"{x}\n" for x in lines).encode(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""

    group = ["--master", master, "--topic", topic, "--group", "cli_whole", "--format", "raw"]
    first = run_cli(
        "consume", *group, *shlex.split("--from earliest --count 1 --finish-batch --timeout 90")
    )
    assert first.returncode == 0, first.stderr
    rest = run_cli("consume", *group, "-e", "--timeout", "90")
    assert rest.returncode == 0, rest.stderr
    assert b"reached the end of every partition" in rest.stderr
    printed = first.stdout.decode().split() + rest.stdout.decode().split()
    assert sorted(printed) == sorted(lines)  # nothing lost, nothing twice

    again = run_cli(
        *shlex.split(
            f"consume --master {master} --topic {topic} --partition all "
            "--offset earliest -e -q --format raw"
        ),
    )
    assert again.returncode == 0, again.stderr
    assert again.stderr == b""
    assert sorted(again.stdout.decode().split()) == sorted(lines)

    topics = run_cli("topics", "--web", web, "--format", "json")
    assert topics.returncode == 0, topics.stderr
    mine = [t for t in json.loads(topics.stdout) if t["topic"] == topic]
    assert mine == [
        {
            "topic": topic,
            "partitions": 3 * len(cluster.brokers),
            "running_partitions": 3 * len(cluster.brokers),
            "publish": True,
            "subscribe": True,
        }
    ]
    argv = cli_argv(
        *shlex.split(
            f"consume --master {master} --topic {topic} --group cli_online "
            "--from earliest --format raw"
        ),
    )
    online = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    try:
        assert online.stdout is not None
        assert online.stdout.readline()  # joined and consuming
        groups = run_cli("groups", "--web", web, "--topic", topic, "--format", "json")
        table = run_cli("groups", "--web", web, "--topic", topic)
    finally:
        online.terminate()
        online.communicate(timeout=CALL_TIMEOUT)
    assert groups.returncode == 0, groups.stderr
    assert json.loads(groups.stdout) == [{"group": "cli_online", "topics": [topic], "consumers": 1}]
    assert table.stdout.decode().split() == [
        "group",
        "topics",
        "consumers",
        "cli_online",
        topic,
        "1",
    ]


def test_listings_at_a_client_port_fail_at_once_naming_the_web_port(cluster: LocalCluster) -> None:
    """``topics --web`` at the real master's client port (and a broker's): the servers answer
    the HTTP request with nothing, and the command waited the web API's 10 s timeout; the
    TubeMQ probe the command sends first is answered in TubeMQ frames at once."""
    for address in (cluster.master_addr, cluster.brokers[0].addr):
        done = run_cli("topics", "--web", address)
        assert done.returncode == 1, done.stderr
        line = _one_error_line(done.stderr)
        assert f"{address} is a TubeMQ client (RPC) port" in line, line
        assert "8080" in line


def test_master_at_a_broker_port_names_the_master_port(cluster: LocalCluster, topic: str) -> None:
    """``--master`` at the real broker's client port: the broker answers a master call with
    ``No service 1 found on the server``, and the line says what to give instead."""
    address = cluster.brokers[0].addr
    done = run_cli("partitions", "--master", address, "--topic", topic)
    assert done.returncode == 1, done.stderr
    line = _one_error_line(done.stderr)
    assert "No service 1 found" in line, line
    assert f"{address} is a TubeMQ node without the master service" in line, line
    assert f"the address came from --master {address}" in line, line
    assert "8715" in line, line


def test_usage_errors_exit_2_with_one_line() -> None:
    """Bad command lines fail before any I/O: exit 2 and one line naming the problem (the
    argparse cases are unit-tested in-process; these two cross the whole process)."""
    cases = [
        (["produce", "--topic", "t"], "--master"),
        (["consume", "--master", "127.0.0.1:1", "--topic", "t", "--group", "1bad"], "group"),
    ]
    for argv, needle in cases:
        done = run_cli(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert needle in _one_error_line(done.stderr), argv
        assert done.stdout == b""


def test_unreachable_master_exits_1_with_one_line(port: int) -> None:
    """Nothing listens at the master address: exit 1 and one line naming the failure."""
    done = run_cli("produce", "--topic", "t", "--master", f"127.0.0.1:{port}", stdin=b"x\n")
    assert done.returncode == 1, done.stderr
    line = _one_error_line(done.stderr)
    assert f"127.0.0.1:{port}" in line
    assert "connect" in line.lower()


def test_help_is_complete() -> None:
    """``--help`` of the tool and of each command names every command and option."""
    done = run_cli("--help")
    assert done.returncode == 0
    for command in ("produce", "consume", "partitions", "lag", "topics", "groups", "cluster"):
        assert command in done.stdout.decode()
    expected = {
        "produce": ["--attr", "--msg-type", "--key", "--rate", "--json", "FILE|-"],
        "consume": [
            *shlex.split(
                "--group --from --count --timeout --format --msg-type "
                "--partition --offset --exit-at-end --finish-batch --tls-ca "
                "--tls-cert --tls-key --user --password -q"
            ),
        ],
        "topics": ["--web", "--format"],
        "groups": ["--web", "--topic", "--format"],
        "cluster": ["up", "down", "status"],
    }
    for command, options in expected.items():
        done = run_cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert all(o in done.stdout.decode() for o in options), command
