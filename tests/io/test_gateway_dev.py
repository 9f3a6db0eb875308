"""``tubemq-gateway dev --fake`` end to end: it starts a real redis-server and the fake cluster,
serves produce → fetch → ack and the listings, and on SIGINT/SIGTERM leaves no process and no
file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_dev import ROOT, alive, dev_env, start_dev
from tubemq_aio.gateway.dev import DEV_NOTICE, REDIS_PACKAGE

#: Runs `tubemq-gateway dev` as a process: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_dev_serves_and_removes_everything_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    dev = start_dev(["--fake"], tmp_path / "tmp")
    try:
        assert dev.lines[0] == DEV_NOTICE
        assert len(dev.key) >= 24
        children = dev.descendants()
        assert children, "the redis-server it owns"
        auth = {"Authorization": f"Bearer {dev.key}"}
        with httpx.Client(base_url=dev.url, headers=auth, timeout=30) as http:
            r = http.post("/v1/topics/demo/messages", json={"value": "hello", "key": "k"})
            assert r.status_code == 200, r.text
            r = http.post("/v1/groups/demo-group/fetch", json={"wait_ms": 5000})
            assert r.json()["status"] == "ok", r.text
            assert [m["value"] for m in r.json()["messages"]] == ["hello"]
            token = r.json()["lease"]["token"]
            group = http.get("/v1/groups/demo-group").json()
            assert [lease["partition_key"] for lease in group["leases"]] == [
                r.json()["lease"]["partition_key"]
            ]
            assert http.post(f"/v1/leases/{token}/ack").json() == {"result": "acked"}
            topic = http.get("/v1/topics/demo").json()
            assert len(topic["partitions"]) == 3
            assert (
                http.get("/v1/topics", headers={"Authorization": "Bearer nope"}).status_code == 401
            )
        assert os.listdir(dev.tmp), "redis keeps its files under TMPDIR while it runs"
        assert dev.stop(sig) == 0
    finally:
        if dev.proc.poll() is None:
            dev.proc.kill()
            dev.proc.wait(10)
    out = dev.proc.stdout.read() if dev.proc.stdout else ""
    assert "stopping" in out
    assert not [pid for pid in children if alive(pid)]
    assert os.listdir(dev.tmp) == []


def test_dev_without_redis_server_names_the_package(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # a PATH without redis-server
    done = subprocess.run(
        [sys.executable, "-m", "tubemq_aio.gateway", "dev", "--fake"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"apt-get install {REDIS_PACKAGE}" in done.stderr
    assert DEV_NOTICE in done.stdout


@pytest.mark.parametrize(
    "args", [[], ["--fake", "--masters", "127.0.0.1:8715"]], ids=["neither", "both"]
)
def test_dev_needs_masters_or_fake(args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TUBEMQ_GATEWAY_MASTERS"}
    done = subprocess.run(
        [sys.executable, "-m", "tubemq_aio.gateway", "dev", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "give --masters HOST:PORT or --fake" in done.stderr


def test_a_signal_during_start_up_still_removes_everything(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tubemq_aio.gateway", "dev", "--fake"],
        cwd=ROOT,
        env=dev_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == DEV_NOTICE
    proc.send_signal(signal.SIGINT)  # while Redis and the fake cluster start
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    assert os.listdir(tmp) == []
