"""The Node.js stream reader of docs/gateway.md ("Streaming consume"), run as written: saved as
``stream.mjs`` and started with ``GW`` and ``KEY`` in the environment, against a gateway on
uvicorn, a real redis-server and the FakeCluster. It used to name ``GW`` and ``KEY`` without
defining them (a ReferenceError when saved as the file it is), and a refused stream ended it
with status 0 and nothing printed."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_failover_support import produce_numbered
from tests.support.gateway_stream_support import (
    READER,
    READER_KEY,
    drained_lag_over_http,
    serving,
    stream_config,
)
from tubemq_aio.testing import FakeCluster, RedisServer

#: Starts Node.js: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

DOC = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"
SECTION = "### Streaming consume (Server-Sent Events)"
_BLOCK = re.compile(r"^```javascript\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def stream_reader() -> str:
    """The section's one JavaScript block."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n### ", start + len(SECTION))
    (block,) = _BLOCK.findall(text[start:end])
    return str(block)


async def run_reader(script: Path, url: str, key: str) -> tuple[int, str, str]:
    """``node script`` with ``GW`` and ``KEY`` set; its status, stdout and stderr."""
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (Debian package nodejs; `make test` installs it)"
    env = {**os.environ, "GW": url, "KEY": key}
    proc = await asyncio.create_subprocess_exec(
        node, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(90):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_documented_stream_reader_runs_as_written(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    script = tmp_path / "stream.mjs"
    script.write_text(stream_reader())
    async with FakeCluster(topics={"t": 2}, max_batch=4) as cluster:
        config = stream_config(
            cluster.master_addr,
            redis_server.url,
            [{"name": "g1", "topics": ["t"]}],
            stream={"max_seconds": 3.0},  # the stream ends, so the script does
        )
        sent = await produce_numbered(cluster.master_addr, "t", 12)
        async with serving(config) as url:
            status, out, err = await run_reader(script, url, READER_KEY)
            assert status == 0, err[-3000:]
            printed = [line.split(" ", 1)[1] for line in out.splitlines()]
            assert sorted(printed) == sorted(sent)
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                await drained_lag_over_http(client, "g1", READER)  # every batch was acked
            status, out, err = await run_reader(script, url, "not-a-key")
            assert status != 0
            assert out == ""
            assert "401" in err, err[-3000:]
            assert "unauthorized" in err, err[-3000:]
