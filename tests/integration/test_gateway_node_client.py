"""A Node.js client (built-in ``fetch`` only) against a real replica, cluster and Redis.

The gateway exists for clients in other languages; JavaScript reads JSON numbers as doubles,
so ids and offsets must be strings to survive. ``scripts/gateway_client.mjs`` produces,
fetches, acks and resets through one uvicorn replica and checks every id, offset and error body
as it goes; this test checks its summary again from Python.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.support.gateway_support import ADMIN_KEY, Group, gateways, write_config
from tests.support.node_scripts import node_script
from tubemq_aio.testing import LocalCluster, RedisServer

SCRIPT = Path(__file__).parent / "scripts" / "gateway_client.mjs"
COUNT = 40


async def test_node_client_round_trips_ids_and_offsets_exactly(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gnode", [topic])]
    )
    async with (
        gateways(config, 1) as (reps, _clients),
        node_script(SCRIPT, reps[0].url, ADMIN_KEY, topic, "gnode", str(COUNT)) as proc,
    ):
        async with asyncio.timeout(150):
            out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    summary = json.loads(out.decode().strip().splitlines()[-1])
    produced: dict[str, str] = summary["produced"]
    assert sorted(produced) == sorted(f"node-{i}" for i in range(COUNT))
    assert summary["delivered"] == produced
    assert summary["acked"] >= 1
    assert all(isinstance(v, str) and int(v) >= 0 for v in produced.values())
    # The broker's ids really are beyond a double's exact range, and JavaScript numbers
    # would have changed them: the strings are what kept them whole.
    assert summary["beyond_2_53"] > 0, produced
    assert summary["changed_as_numbers"] > 0, produced
    print(
        f"\nids changed as JavaScript numbers: {summary['changed_as_numbers']} of {COUNT}, "
        f"distinct ids merged: {summary['collisions']}"
    )
    assert max(int(v) for v in produced.values()) > 2**53
    assert summary["reset_to"]
    assert all(isinstance(v, str) for v in summary["reset_to"].values())
    assert [status for status, _code in summary["errors"]] == [422, 422, 422, 404, 400, 401, 404]
