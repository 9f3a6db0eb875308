"""A new group's first message on the local cluster, with default settings, in under 3 s of
``start()`` (issue 32): the consumer heartbeats every second while it waits for its first
partitions when every master is a loopback address (the master balances every 2 s here, and
hands partitions out only in heartbeat answers). With the join heartbeats off, as the Java
client, it takes one 13 s heartbeat period; and ``tubemq-aio consume`` gets the same rule.

The 3 s bound is the requirement itself, so it is asserted as a wall-clock figure (the one
place in the suite); each measurement is printed."""

from __future__ import annotations

import asyncio
import shlex
import time
import uuid

from tests.support.cli_run import CALL_TIMEOUT, cli_argv, cli_env
from tubemq_aio import Consumer, Producer
from tubemq_aio.testing import LocalCluster

#: The requirement: a new group's first message within this many seconds of ``start()``.
FIRST_MESSAGE_WITHIN = 3.0
#: Measurements of it, each with a new group.
TRIES = 3
#: With the join heartbeats off the wait must be at least this many times longer (idle: about
#: 13 s against about 1-2 s): "off" is the Java client's behaviour.
AT_LEAST_TIMES_SOONER = 2.0
#: A first message not there by then fails the measurement (not a hang).
GIVE_UP = 40.0


async def _first_message_seconds(master: str, topic: str, **options: object) -> float:
    consumer = Consumer(
        master,
        group=f"first_{uuid.uuid4().hex[:8]}",
        topics=[topic],
        consume_from="earliest",
        **options,  # type: ignore[arg-type]
    )
    async with asyncio.timeout(GIVE_UP):
        began = time.monotonic()
        await consumer.start()
        try:
            async for _ in consumer:
                return time.monotonic() - began
        finally:
            await consumer.close()
    raise AssertionError("the loop ended without a message")


async def test_a_new_group_with_default_settings_gets_its_first_message_within_3_s(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        await producer.send(topic, b"first")
    took = [await _first_message_seconds(cluster.master_addr, topic) for _ in range(TRIES)]
    times = ", ".join(f"{t:.2f} s" for t in took)
    print(f"\nfirst message of a new group, default settings: {times}")
    assert all(t < FIRST_MESSAGE_WITHIN for t in took), took


async def test_with_the_join_heartbeats_off_it_waits_a_heartbeat_period(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        await producer.send(topic, b"first")
    as_java = await _first_message_seconds(cluster.master_addr, topic, join_heartbeat_interval=0)
    default = await _first_message_seconds(cluster.master_addr, topic)
    print(f"\nfirst message: {as_java:.2f} s with join heartbeats off, {default:.2f} s by default")
    assert default * AT_LEAST_TIMES_SOONER < as_java, (default, as_java)


async def test_the_cli_reads_the_first_message_of_the_local_cluster(
    cluster: LocalCluster, topic: str
) -> None:
    async with Producer(cluster.master_addr, topics=[topic]) as producer:
        await producer.send(topic, b"cli-first")
    env = cli_env()
    argv = cli_argv(
        *shlex.split(f"consume --master {cluster.master_addr} --topic {topic} --group"),
        f"cli_{uuid.uuid4().hex[:8]}",
        *shlex.split("--from earliest --count 1 --format raw"),
    )
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), CALL_TIMEOUT)
    took = time.monotonic() - began
    assert proc.returncode == 0, err
    assert out == b"cli-first\n"
    # that it leaves the join interval to the consumer's rule: tests/unit/test_cli_join.py
    print(f"\ncli consume, first message: {took:.2f} s (interpreter start included)")
