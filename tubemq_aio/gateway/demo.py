"""``make gateway-demo``: a local cluster, Redis and one gateway replica, driven with curl.

Run as ``python -m tubemq_aio.gateway.demo``. Prints every curl command and its answer: produce
a few messages, fetch a batch with a lease token, ack it, show the lag, then stop everything.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import tempfile
from pathlib import Path

from tubemq_aio.testing import LocalCluster, RedisServer
from tubemq_aio.testing.gateway import GatewayReplica

__all__ = ["main", "run_demo"]

TOPIC = "demo"
GROUP = "demo-group"
KEY = "demo-key-123"


def _say(text: str) -> None:
    print(text, flush=True)


async def _curl(*args: str) -> dict[str, object]:
    argv = ["curl", "-sS", "--max-time", "40", *args]
    shown = " ".join(shlex.quote(a) for a in argv if a != "-sS")
    _say(f"\n$ {shown}")
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"curl failed: {err.decode()}")
    reply: dict[str, object] = json.loads(out)
    _say(json.dumps(reply, indent=2))
    return reply


def _config(path: Path, masters: str, redis_url: str) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "demo-secret-0123456789"\n'
        f'produce_topics = ["{TOPIC}"]\n'
        f'[[groups]]\nname = "{GROUP}"\ntopics = ["{TOPIC}"]\nlease_ms = 30000\n'
        f'[[keys]]\nkey = "{KEY}"\nscopes = ["produce:*", "consume:*", "admin:*"]\n'
    )
    return path


async def run_demo() -> int:
    """Run the demo; 0 when the fetched batch was acked, 1 otherwise."""
    _say("starting a local TubeMQ cluster (first run downloads the jars), Redis and a gateway ...")
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-demo-") as tmp:
        async with (
            LocalCluster(brokers=1, topics=[TOPIC], topic_partitions=3) as cluster,
            RedisServer() as redis,
        ):
            config = _config(Path(tmp) / "gateway.toml", cluster.master_addr, redis.url)
            _say(f"gateway config:\n{config.read_text()}")
            async with GatewayReplica(config) as gw:
                _say(f"gateway replica listening on {gw.url}")
                auth = [
                    "-H",
                    f"Authorization: Bearer {KEY}",
                    "-H",
                    "Content-Type: application/json",
                ]
                for i in range(3):
                    body = json.dumps({"value": f"hello {i}", "attributes": {"n": str(i)}})
                    await _curl(*auth, "-d", body, f"{gw.url}/v1/topics/{TOPIC}/messages")
                reply: dict[str, object] = {}
                for _ in range(20):
                    reply = await _curl(
                        *auth, "-d", '{"wait_ms": 2000}', f"{gw.url}/v1/groups/{GROUP}/fetch"
                    )
                    if reply.get("status") == "ok":
                        break
                lease = reply.get("lease")
                if not isinstance(lease, dict):
                    _say("no batch was delivered")
                    return 1
                acked = await _curl(*auth, "-X", "POST", f"{gw.url}/v1/leases/{lease['token']}/ack")
                await _curl(*auth, f"{gw.url}/v1/groups/{GROUP}/lag")
                ok = acked.get("result") == "acked"
                _say("\ndemo done: produce -> fetch -> ack " + ("worked" if ok else "FAILED"))
                return 0 if ok else 1


def main() -> int:
    """Entry point of ``python -m tubemq_aio.gateway.demo``."""
    return asyncio.run(run_demo())


if __name__ == "__main__":
    sys.exit(main())
