"""Run the official TubeMQ Java client (through our interop tool) against the test cluster."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

import pytest

from benchmarks.peers.build import JAVA_INTEROP_CLASS, build_java, java_command
from tubemq_aio.testing import LocalCluster

_built: asyncio.Lock | None = None
_ready = False


async def _ensure_built() -> None:
    global _built, _ready
    if _built is None:
        _built = asyncio.Lock()
    async with _built:
        if not _ready:
            await asyncio.to_thread(build_java)
            _ready = True


async def finish_or_fail(
    proc: asyncio.subprocess.Process, timeout: float, what: str, cluster: LocalCluster
) -> tuple[bytes, bytes]:
    """The stdout and stderr of ``proc`` once it ended; killed and a test failure (with the
    cluster's log tails) when it runs longer than ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"{what} did not finish in {timeout}s\n{cluster.log_tails(20)}")


async def _run(cluster: LocalCluster, args: list[str], timeout: float) -> str:
    await _ensure_built()
    proc = await asyncio.create_subprocess_exec(
        *java_command(args, jvm_opts=("-Xmx512m",), main_class=JAVA_INTEROP_CLASS),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finish_or_fail(proc, timeout, f"Java interop {args[0]}", cluster)
    if proc.returncode != 0:
        pytest.fail(
            f"Java interop {args[0]} exited {proc.returncode}\n{err.decode()[-3000:]}\n"
            f"{cluster.log_tails(20)}"
        )
    return out.decode()


async def java_dump(
    cluster: LocalCluster, topic: str, group: str, count: int, timeout: float = 240
) -> list[dict[str, Any]]:
    """Consume ``count`` messages from the first offset with the Java client; one dict each
    (``body_b64``, ``attribute``, ``msg_type``, ``msg_time``)."""
    out = await _run(
        cluster,
        [
            *shlex.split(
                f"dump --master {cluster.master_addr} --topic {topic} --group "
                f"{group} --count {count}"
            ),
        ],
        timeout,
    )
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


async def java_produce(cluster: LocalCluster, topic: str, count: int, timeout: float = 240) -> None:
    """Send ``count`` messages with the Java client: body ``java-<i>``, attributes
    ``idx=<i>,src=java``, msgType ``type<i % 3>``, msgTime ``202611220630``."""
    out = await _run(
        cluster,
        ["produce", "--master", cluster.master_addr, "--topic", topic, "--count", str(count)],
        timeout,
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["failed"] == 0, result
