"""``tubemq-gateway`` configured by the environment alone (no file): the worker process builds
its app from the same ``TUBEMQ_GATEWAY_*`` variables the command checked, a secret comes from a
``_FILE`` path and the API keys from a keys file."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tubemq_aio.testing import FakeCluster

#: Runs `tubemq-gateway` as a process: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_produce_only_gateway_from_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("env-secret-0123456789\n")
    keys = tmp_path / "keys.toml"
    keys.write_text('[[keys]]\nname = "app"\nkey = "env-key-0123456789"\nscopes = ["produce:*"]\n')
    port = free_port()
    async with FakeCluster(topics={"t": 2}) as cluster:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("TUBEMQ_GATEWAY_")},
            "PYTHONPATH": str(ROOT),
            "TUBEMQ_GATEWAY_MASTERS": cluster.master_addr,
            "TUBEMQ_GATEWAY_REDIS": "redis://127.0.0.1:1/0",  # unused: no groups
            "TUBEMQ_GATEWAY_SECRET_FILE": str(secret),
            "TUBEMQ_GATEWAY_KEYS_FILE": str(keys),
            "TUBEMQ_GATEWAY_PRODUCE_TOPICS": "t",
            "TUBEMQ_GATEWAY_PORT": str(port),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *shlex.split("-m tubemq_aio.gateway --log-level warning"),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            auth = {"Authorization": "Bearer env-key-0123456789"}
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
                for _ in range(300):
                    try:
                        if (await http.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None, "the gateway exited"
                    await asyncio.sleep(0.1)
                r = await http.post("/v1/topics/t/messages", json={"value": "x"}, headers=auth)
                assert r.status_code == 200, r.text
                r = await http.get("/v1/topics", headers=auth)
                assert r.json() == {"topics": [{"name": "t", "produce": True, "groups": []}]}
        finally:
            proc.terminate()
            _, err = await asyncio.wait_for(proc.communicate(), 30)
        # uvicorn shuts down gracefully, then re-raises the signal: it ends as SIGTERM did
        assert proc.returncode in (0, -signal.SIGTERM), err.decode()
        assert b"Traceback" not in err
