"""The local TubeMQ cluster itself, on the shared test cluster: Java interop smoke, broker faults,
topic creation and deletion (its start-up errors and the ``up`` CLI: ``test_cluster_start.py``)."""

from __future__ import annotations

import asyncio
import os
import re
import time

from tests.support.java_interop import finish_or_fail
from tubemq_aio.testing import LocalCluster
from tubemq_aio.testing._process import pid_alive

CLI = "org.apache.inlong.tubemq.server.tools.cli"
MESSAGES = 3000


async def run_tool(cluster: LocalCluster, main: str, *args: str, timeout: float = 120) -> str:
    """Run a Java tool from the server classpath and return its stdout (fails on timeout)."""
    proc = await asyncio.create_subprocess_exec(
        *cluster.java_tool_argv(main, *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await finish_or_fail(proc, timeout, main, cluster)
    return out.decode(errors="replace")


async def java_produce(cluster: LocalCluster, topic: str, count: int) -> None:
    """Send ``count`` messages with the official Java CliProducer and check all succeeded."""
    out = await run_tool(
        cluster,
        f"{CLI}.CliProducer",
        *("--master-servers", cluster.master_addr, "--topicName", topic),
        *("--messages", str(count), "--message-data-size", "256", "--num-send-threads", "1"),
        *("--client-count", "1", "--without-delay", "--sync-produce"),
    )
    done = re.search(r"Finished.*= (\d+) : (\d+) \((\d+):(\d+):(\d+)\)", out)
    assert done, out[-3000:]
    assert done.groups() == (str(count), str(count), str(count), "0", "0"), out[-3000:]


async def java_consume(cluster: LocalCluster, topic: str, group: str, count: int) -> None:
    """Consume ``count`` messages from the first offset with the official Java CliConsumer."""
    out = await run_tool(
        cluster,
        f"{CLI}.CliConsumer",
        *("--master-servers", cluster.master_addr, "--topicName", topic),
        *("--groupName", group, "--consume-position", "-1", "--num-fetch-threads", "1"),
        *("--client-count", "1", "--messages", str(count)),
    )
    done = re.search(r"Finished.*= (\d+) : (\d+)", out)
    assert done, out[-3000:]
    assert int(done.group(2)) >= count, out[-3000:]


async def test_java_cli_producer_and_consumer_roundtrip(cluster: LocalCluster, topic: str) -> None:
    """The cluster works for the reference Java client, independently of our client."""
    assert re.fullmatch(r"127\.0\.0\.1:\d+", cluster.master_addr)
    assert [b.layout.host for b in cluster.brokers] == ["127.0.0.1", "127.0.0.2"][
        : len(cluster.brokers)
    ]
    await java_produce(cluster, topic, MESSAGES)
    await java_consume(cluster, topic, f"g_{topic}", MESSAGES)


async def test_broker_kill_restart_and_stop_start(cluster: LocalCluster, topic: str) -> None:
    """SIGKILL a broker, start it again, stop it gracefully, restart: it serves traffic."""
    broker = cluster.brokers[-1]
    old_pid = broker.pid
    assert old_pid is not None
    await broker.kill()
    assert not broker.running
    assert not pid_alive(old_pid)
    t0 = time.monotonic()
    await broker.start()
    assert broker.running
    assert broker.pid != old_pid
    status = await broker.run_status()
    assert status["runStatus"] == "running", status
    await broker.restart()
    assert broker.running
    print(f"kill+start+restart of {broker.name} ready after {time.monotonic() - t0:.1f}s")
    await java_produce(cluster, topic, 1000)
    await java_consume(cluster, topic, f"g_{topic}", 1000)


async def test_create_and_delete_topic(cluster: LocalCluster) -> None:
    """create_topic waits until publishable; delete_topic removes it from the master."""
    name = f"it_del_{os.getpid()}"
    await cluster.create_topic(name, partitions=1)
    assert await cluster.topic_ready(name)
    await cluster.delete_topic(name)
    items = await cluster.web_api.call("admin_query_topic_info", topicName=name)
    assert not items or not items[0].get("topicInfo")
