"""A Node.js client reads the stream with its built-in ``fetch`` (no packages), against a
gateway on uvicorn, a real redis-server and the FakeCluster: ``scripts/gateway_stream.mjs`` gets
messages sent before and after it opened the stream, acks each batch, and leaves; this test
checks its summary and that nothing is left unacked (no fetch gets anything again)."""

from __future__ import annotations

import asyncio
import json
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
from tests.support.node_scripts import node_script
from tubemq_aio.testing import FakeCluster, RedisServer

#: Starts Node.js: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

SCRIPT = Path(__file__).parent / "scripts" / "gateway_stream.mjs"
HALF = 20


async def test_node_reads_the_stream_with_fetch_and_acks(redis_server: RedisServer) -> None:
    async with FakeCluster(topics={"t": 2}, max_batch=5) as cluster:
        config = stream_config(
            cluster.master_addr, redis_server.url, [{"name": "gn", "topics": ["t"]}]
        )
        before = await produce_numbered(cluster.master_addr, "t", HALF)
        async with serving(config) as url:
            async with node_script(SCRIPT, url, READER_KEY, "gn", str(2 * HALF)) as proc:
                assert proc.stdout is not None
                async with asyncio.timeout(60):
                    first = await proc.stdout.readline()
                assert first.decode().strip() == "open", first
                after = await produce_numbered(cluster.master_addr, "t", HALF, start=HALF)
                async with asyncio.timeout(90):
                    out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()[-3000:]
            summary = json.loads(out.decode().strip().splitlines()[-1])
            assert sorted(summary["values"]) == sorted(before + after)
            assert summary["acked"] == summary["events"]["batch"] >= (2 * HALF) // 5
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                # every batch the script read was acked: nothing is delivered again
                await drained_lag_over_http(client, "gn", READER)
