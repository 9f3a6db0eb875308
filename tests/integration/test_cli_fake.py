"""``tubemq-aio consume`` as a kcat user drives it: subprocesses against an in-process fake.

The fake (:class:`FakeCluster`) serves from this test's event loop while each command runs in a
thread, so these tests need no Java and take seconds. The same commands against the real cluster
are in ``test_cli_cluster.py`` (kept few: each group join costs seconds there).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import shlex
import signal
import subprocess
import time
from collections.abc import AsyncIterator

import pytest_asyncio

from tests.support.cli_run import CALL_TIMEOUT, cli_argv, cli_env
from tubemq_aio import Consumer
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster

COUNT = 30


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeCluster]:
    """A fake with topic ``src`` (3 partitions) holding COUNT messages and an empty ``copy``."""
    async with FakeCluster({"src": 3, "copy": 3}, max_batch=8) as cluster:
        lines = "".join(
            json.dumps(
                {
                    "body": f"m{i}",
                    "attributes": {"i": str(i)},
                    "msg_type": "t",
                    "msg_time": "2026-01-02T03:04:00",
                }
            )
            + "\n"
            for i in range(COUNT)
        )
        done = await _cli(cluster, "produce", "--topic", "src", "--json", "-q", stdin=lines)
        assert done.returncode == 0, done.stderr
        assert done.stderr == b""  # -q: no summary
        yield cluster


async def _cli(
    cluster: FakeCluster, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[bytes]:
    env = dict(cli_env(), TUBEMQ_AIO_MASTER=cluster.master_addr)
    return await asyncio.to_thread(
        subprocess.run,
        cli_argv(*args),
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=CALL_TIMEOUT,
    )


def _bodies(out: bytes) -> list[str]:
    return [json.loads(line)["body"] for line in out.splitlines()]


async def test_partition_offsets_and_exit_at_end(fake: FakeCluster) -> None:
    """``--partition all --offset earliest -e`` prints everything once and exits 0; one
    partition from index offset 56 starts at its third message, from ``latest`` prints
    nothing; ``-q`` silences the end summary; an unknown
    partition is named in one error line."""
    done = await _cli(
        fake, *shlex.split("consume --topic src --partition all --offset earliest -e")
    )
    assert done.returncode == 0, done.stderr
    assert sorted(_bodies(done.stdout)) == sorted(f"m{i}" for i in range(COUNT))
    assert b"reached the end of every partition: 30 messages" in done.stderr

    key = "1:src:1"
    done = await _cli(
        fake, *shlex.split(f"consume --topic src --partition {key} --offset earliest -e -q")
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    one = [json.loads(line) for line in done.stdout.splitlines()]
    assert one
    assert {r["partition_key"] for r in one} == {key}
    stored = fake.brokers[0].log("src", 1).partition_messages(1)
    assert len(one) == len(stored)

    third = str(stored[2].offset)  # the index offset of the partition's third message
    done = await _cli(
        fake,
        *shlex.split(f"consume --topic src --partition {key} --offset {third} -e -q --format raw"),
    )
    assert done.returncode == 0, done.stderr
    assert len(stored) == len(one) > 2
    assert done.stdout.decode().split() == [r["body"] for r in one][2:]  # in partition order

    done = await _cli(
        fake, *shlex.split(f"consume --topic src --partition {key} --offset latest -e -q")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""

    done = await _cli(fake, "consume", "--topic", "src", "--partition", "9:src:0", "-e")
    assert done.returncode == 2  # an unknown partition is a usage error: nothing was read
    assert b"9:src:0" in done.stderr


async def test_a_partition_named_twice_is_read_once(fake: FakeCluster) -> None:
    """``--partition K --partition K`` stopped with "partition K is connected" (exit 2); a
    repeated key now names the partition once (as ``K`` beside ``all`` always did)."""
    once = await _cli(
        fake, *shlex.split("consume --topic src --partition 1:src:1 --offset earliest -e -q")
    )
    assert once.returncode == 0, once.stderr
    assert once.stdout
    twice = await _cli(
        fake,
        *shlex.split(
            "consume --topic src --partition 1:src:1 --partition 1:src:1 --offset earliest -e -q"
        ),
    )
    assert twice.returncode == 0, twice.stderr
    assert twice.stdout == once.stdout
    done = await _cli(
        fake,
        *shlex.split(
            "consume --topic src --partition all --partition 1:src:1 --offset earliest -e -q"
        ),
    )
    assert done.returncode == 0, done.stderr
    assert sorted(_bodies(done.stdout)) == sorted(f"m{i}" for i in range(COUNT))


async def test_lag_and_reset_of_a_group_consumed_now_say_what_to_do(fake: FakeCluster) -> None:
    """The master refuses a client-balanced member while server-balanced ones are online
    (424); ``lag`` and ``reset`` said only "ServerError: [424] ..." (the real master's text
    names the consume types), now what it means for them and what to do."""
    async with Consumer(fake.master_addr, group="online", topics=["src"]) as member:
        await member.wait_for_assignment(10)
        # lag joins once; reset's time search joins the planner group first.
        for command, joins in (("lag", 1), ("reset --to-time 2026-01-02T03:04:00Z --dry-run", 2)):
            before = fake.requests(Method.MASTER_CONSUMER_REGISTER_V2)
            done = await _cli(fake, *shlex.split(f"{command} --topic src --group online"))
            assert done.returncode == 1, done.stderr
            err = done.stderr.decode()
            assert "[424]" in err
            assert "group 'online' has server-balanced consumers online" in err
            assert "stop them first" in err
            # The refusal ends the command at its first answer: it was asked again for the
            # consumer's register window (about 4.5 s).
            assert fake.requests(Method.MASTER_CONSUMER_REGISTER_V2) - before == joins


async def test_partitions_lag_and_reset_print_json(fake: FakeCluster) -> None:
    """``--format json`` on every command that prints a table: one array of objects with the
    table's fields (numbers as numbers, booleans as booleans)."""
    done = await _cli(fake, *shlex.split("partitions --topic src --format json"))
    assert done.returncode == 0, done.stderr
    parts = json.loads(done.stdout)
    assert sorted(p["id"] for p in parts) == [0, 1, 2]
    assert all(
        p["subscribable"] is True and p["partition"].endswith(f":src:{p['id']}") for p in parts
    )
    table = await _cli(fake, *shlex.split("partitions --topic src"))
    assert [line.split()[-1] for line in table.stdout.decode().splitlines()] == [
        "subscribable",
        "yes",
        "yes",
        "yes",
    ]
    consumed = await _cli(
        fake, *shlex.split("consume --topic src --group gj --from earliest -e -q")
    )
    assert consumed.returncode == 0, consumed.stderr
    lag = await _cli(fake, *shlex.split("lag --topic src --group gj --format json"))
    assert lag.returncode == 0, lag.stderr
    rows = json.loads(lag.stdout)
    assert sorted(r["partition"] for r in rows) == sorted(p["partition"] for p in parts)
    assert all(r["lag"] == 0 and r["offset"] == r["max"] > 0 for r in rows), rows
    dry = await _cli(
        fake,
        *shlex.split(
            "reset --topic src --group gj --to-time 2026-01-02T03:04:00Z --dry-run --format json"
        ),
    )
    assert dry.returncode == 0, dry.stderr
    moves = json.loads(dry.stdout)
    assert all(m["new"] == 0 and m["old"] > 0 and m["past_end"] is False for m in moves), moves


async def test_json_output_round_trips_through_produce(fake: FakeCluster) -> None:
    """``consume --format json | produce --json`` copies every message with its body,
    attributes, type and time; the printed ids are strings."""
    done = await _cli(
        fake, *shlex.split("consume --topic src --group g_copy --from earliest -e -q")
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.decode()
    assert all(isinstance(json.loads(line)["message_id"], str) for line in printed.splitlines())
    copied = await _cli(fake, "produce", "--topic", "copy", "--json", "-q", stdin=printed)
    assert copied.returncode == 0, copied.stderr
    back = await _cli(
        fake, *shlex.split("consume --topic copy --partition all --offset earliest -e -q")
    )
    assert back.returncode == 0, back.stderr

    def same(line: str) -> tuple[object, ...]:
        r = json.loads(line)
        return (r["body"], r["body_encoding"], r["attributes"], r["msg_type"], r["msg_time"])

    original = sorted(same(line) for line in printed.splitlines())
    assert len(original) == COUNT
    assert original[0] == ("m0", "utf-8", {"i": "0"}, "t", "2026-01-02T03:04:00")
    assert sorted(same(line) for line in back.stdout.decode().splitlines()) == original


async def test_count_with_a_group_and_finish_batch(fake: FakeCluster) -> None:
    """``--count 2`` ends inside a broker batch, which stays uncommitted: the next run prints
    the same two (TubeMQ commits whole batches, as ``--help`` says). With ``--finish-batch``
    the next run starts right after the last printed line: nothing lost, nothing twice."""
    first = await _cli(
        fake,
        *shlex.split(
            "consume --topic src --group g_count --from earliest --count 2 --partition 1:src:0"
        ),
    )
    again = await _cli(
        fake,
        *shlex.split(
            "consume --topic src --group g_count --from earliest --count 2 --partition 1:src:0"
        ),
    )
    assert first.returncode == again.returncode == 0, (first.stderr, again.stderr)
    assert len(_bodies(first.stdout)) == 2
    assert _bodies(again.stdout) == _bodies(first.stdout)

    printed: list[str] = []
    for _ in range(3):
        done = await _cli(
            fake,
            *shlex.split(
                "consume --topic src --group g_whole --from earliest --count 2 --finish-batch"
            ),
        )
        assert done.returncode == 0, done.stderr
        assert len(_bodies(done.stdout)) >= 2
        printed += _bodies(done.stdout)
    rest = await _cli(fake, "consume", "--topic", "src", "--group", "g_whole", "-e", "-q")
    assert rest.returncode == 0, rest.stderr
    printed += _bodies(rest.stdout)
    assert sorted(printed) == sorted(f"m{i}" for i in range(COUNT))

    help_text = await _cli(fake, "consume", "--help")
    assert b"TubeMQ commits whole broker batches" in help_text.stdout
    assert b"--finish-batch" in help_text.stdout


async def test_time_offsets_from_and_reset_to_time() -> None:
    """``--offset @TIME``, ``--from @TIME`` and ``reset --to-time`` (with ``--dry-run``) over
    three bursts stamped two minutes apart (docs/protocol/time.md)."""
    async with FakeCluster({"tt": 2}, max_batch=4) as cluster:
        lines = "".join(
            json.dumps({"body": f"b{n}-{i}", "msg_time": f"2026-01-02T03:0{2 * n}:00"}) + "\n"
            for n in range(3)
            for i in range(6)
        )
        done = await _cli(cluster, "produce", "--topic", "tt", "--json", "-q", stdin=lines)
        assert done.returncode == 0, done.stderr
        burst = {n: {f"b{n}-{i}" for i in range(6)} for n in range(3)}
        got = await _cli(
            cluster,
            *shlex.split("consume --topic tt --partition all --offset @2026-01-02T03:03:30Z -e -q"),
        )
        assert got.returncode == 0, got.stderr
        assert set(_bodies(got.stdout)) == burst[2]
        got = await _cli(
            cluster,
            *shlex.split("consume --topic tt --group tg --from @2026-01-02T05:01:00+02:00 -e -q"),
        )
        assert got.returncode == 0, got.stderr
        assert sorted(_bodies(got.stdout)) == sorted(burst[1] | burst[2])
        # The group read to the end; a dry run shows old -> new and changes nothing ...
        dry = await _cli(
            cluster,
            *shlex.split("reset --topic tt --group tg --to-time 2026-01-02T03:00:00Z --dry-run"),
        )
        assert dry.returncode == 0, dry.stderr
        rows = [line.split() for line in dry.stdout.decode().splitlines()[1:]]
        assert len(rows) == 2
        assert all(r[2] == "->" and r[3] == "0" and int(r[1]) > 0 for r in rows), rows
        assert b"dry run: nothing changed" in dry.stderr
        again = await _cli(cluster, "consume", "--topic", "tt", "--group", "tg", "-e", "-q")
        assert _bodies(again.stdout) == []
        # ... the real reset moves the group back to the second burst.
        done = await _cli(
            cluster,
            *shlex.split("reset --topic tt --group tg --to-time 2026-01-02T03:01:00Z -q"),
        )
        assert done.returncode == 0, done.stderr
        again = await _cli(cluster, "consume", "--topic", "tt", "--group", "tg", "-e", "-q")
        assert sorted(_bodies(again.stdout)) == sorted(burst[1] | burst[2])
        bad = await _cli(
            cluster, *shlex.split("reset --topic tt --group tg --to-time 2026-01-02T03:01:00")
        )
        assert bad.returncode == 2
        assert b"no zone" in bad.stderr
        # Stamps read as Shanghai wall times (UTC+8): 03:0x there is 19:0x the day before.
        zoned = await _cli(
            cluster,
            *shlex.split(
                "consume --topic tt --partition all --offset "
                "@2026-01-01T19:03:30Z --msg-time-zone Asia/Shanghai -e -q"
            ),
        )
        assert zoned.returncode == 0, zoned.stderr
        assert set(_bodies(zoned.stdout)) == burst[2]
        dry = await _cli(
            cluster,
            *shlex.split(
                "reset --topic tt --group tg --dry-run --to-time "
                "2026-01-01T19:01:00Z --msg-time-zone Asia/Shanghai"
            ),
        )
        assert dry.returncode == 0, dry.stderr
        rows = [line.split() for line in dry.stdout.decode().splitlines()[1:]]
        assert all(r[3] != "0" for r in rows), rows  # the second burst, not the start
        bad = await _cli(
            cluster,
            *shlex.split(
                "reset --topic tt --group tg --to-time 2026-01-02T03:01:00Z "
                "--msg-time-zone Mars/Base"
            ),
        )
        assert bad.returncode == 2
        assert b"not an IANA time zone" in bad.stderr


async def test_a_partition_the_topic_lacks_is_named_with_the_ones_it_has(fake: FakeCluster) -> None:
    """``--partition 1:src:7`` said "partition 1:src:7 is not in the topic metadata" and a
    malformed key only "bad partition key 'x'": neither said what a key looks like or which
    keys the topic has."""
    for key in ("1:src:7", "bogus"):
        done = await _cli(fake, "consume", "--topic", "src", "--partition", key, "-e")
        assert done.returncode == 2
        (line,) = done.stderr.decode().splitlines()
        assert f"--partition {key}" in line
        assert "1:src:0, 1:src:1, 1:src:2" in line
        assert "tubemq-aio partitions --topic src" in line


def _type_into_produce(master: str) -> tuple[int, bytes]:
    """``produce`` on a terminal: type ``hel``, wait, finish the line, Ctrl-D."""
    leader, follower = pty.openpty()
    env = dict(cli_env(), TUBEMQ_AIO_MASTER=master)
    proc = subprocess.Popen(
        cli_argv("produce", "--topic", "src"),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = bytearray()

    def read_until(marker: bytes) -> None:
        give_up = time.monotonic() + CALL_TIMEOUT
        while marker not in seen:
            left = give_up - time.monotonic()
            ready, _, _ = select.select([leader], [], [], max(left, 0))
            assert ready, (marker, bytes(seen[-300:]))
            seen.extend(os.read(leader, 4096))

    try:
        read_until(b"Ctrl-D")  # the command is reading: it said so
        os.write(leader, b"hel")
        read_until(b"hel")  # the terminal's echo
        mark = len(seen)
        time.sleep(1)  # what a progress display would draw meanwhile lands after `mark`
        os.write(leader, b"lo\n\x04")
        read_until(b"messages to src")
        proc.wait(timeout=CALL_TIMEOUT)
        after_typing = bytes(seen[mark:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return proc.returncode, after_typing


async def test_produce_on_a_terminal_leaves_the_typed_line_alone(fake: FakeCluster) -> None:
    """Typing messages into ``produce`` on a terminal: the progress display redrew its line
    about ten times a second (``\\r`` and erase-line on the terminal the user typed on), which
    wiped a half-typed message from the screen; and nothing said that the command was waiting
    for lines on stdin. Now it says how to type and end, and draws nothing while reading a
    terminal; the summary comes at the end."""
    code, after_typing = await asyncio.to_thread(_type_into_produce, fake.master_addr)
    assert code == 0
    assert b"\x1b[2K" not in after_typing
    assert b"\r\x1b" not in after_typing
    assert b"sent 1 messages to src" in after_typing
    assert b"hello" in fake.bodies("src")


def _consume_on_a_terminal(master: str) -> bytes:
    """``consume --group`` with stderr on a terminal, until it has said something; then
    Ctrl-C."""
    leader, follower = pty.openpty()
    env = dict(cli_env(), TUBEMQ_AIO_MASTER=master)
    proc = subprocess.Popen(
        cli_argv("consume", "--topic", "src", "--group", "newcomer"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = bytearray()
    try:
        give_up = time.monotonic() + CALL_TIMEOUT
        while b"\n" not in seen and proc.poll() is None:
            ready, _, _ = select.select([leader], [], [], max(give_up - time.monotonic(), 0))
            assert ready or proc.poll() is not None, bytes(seen)
            if ready:
                seen.extend(os.read(leader, 4096))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=CALL_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return bytes(seen)


async def test_a_group_consumer_on_a_terminal_says_where_it_starts(fake: FakeCluster) -> None:
    """``consume --topic src --group newcomer`` on a topic holding 30 messages printed nothing
    and waited: a new group starts at the latest message by default, and nothing said so."""
    said = await asyncio.to_thread(_consume_on_a_terminal, fake.master_addr)
    assert b"group newcomer" in said
    assert b"--from earliest" in said
    assert b"Ctrl-C" in said
