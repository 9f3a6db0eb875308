"""The cookbook recipes run for real: the FastAPI service under uvicorn, the SIGTERM worker."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator

import httpx
import pytest

from tests.support.cli_run import (
    CALL_TIMEOUT,
    SOURCE_ROOT,
    cli_env,
    run_cli,
    sigterm_after_first_line,
)
from tubemq_aio.testing import LocalCluster

EXAMPLES = SOURCE_ROOT / "examples"
BENCH_MESSAGES = 500
#: Seconds the service's producer waits for a send / for a topic to become writable.
SERVICE_TIMEOUT = 2.0


def _stored_messages(master: str, topic: str) -> int:
    """Messages stored in ``topic``: one index record of 28 bytes each, per broker store."""
    done = run_cli("lag", "--master", master, "--topic", topic, "--group", "cookbook_count")
    assert done.returncode == 0, done.stderr
    stores: dict[tuple[str, int], int] = defaultdict(int)
    for line in done.stdout.decode().splitlines()[1:]:
        key, _, max_offset, _ = line.split()
        broker, _, partition = key.split(":")
        store = (broker, int(partition) // 10000)
        stores[store] = max(stores[store], int(max_offset))
    return sum(stores.values()) // 28


@pytest.fixture
def service(cluster: LocalCluster, topic: str, port: int) -> Iterator[tuple[str, str]]:
    """The FastAPI recipe under a real uvicorn process; yields its URL and a missing topic."""
    missing = f"never_created_{uuid.uuid4().hex[:8]}"
    env = cli_env() | {
        "TUBEMQ_AIO_MASTER": cluster.master_addr,
        "TUBEMQ_AIO_TOPICS": f"{topic},{missing}",
        "TUBEMQ_AIO_SEND_TIMEOUT": str(SERVICE_TIMEOUT),
        "TUBEMQ_AIO_PUBLISH_TIMEOUT": str(SERVICE_TIMEOUT),
    }
    argv = [
        sys.executable,
        *shlex.split("-m uvicorn fastapi_service:app --app-dir"),
        str(EXAMPLES),
        "--port",
        str(port),
        "--no-access-log",
    ]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "uvicorn did not serve within 60 s"
            time.sleep(0.2)
        yield url, missing
        proc.send_signal(signal.SIGTERM)  # the lifespan closes the producer
        _, err = proc.communicate(timeout=30)
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert proc.returncode in (0, -signal.SIGTERM), err
        assert b"Application shutdown complete" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_fastapi_recipe_under_concurrent_requests(
    cluster: LocalCluster, topic: str, service: tuple[str, str]
) -> None:
    """201 for every concurrent request (rate reported next to the raw SDK), 503 + Retry-After
    for a topic without partitions, 504 when the brokers stop answering."""
    url, missing = service
    bench = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "fastapi_bench.py"),
            *shlex.split(f"--master {cluster.master_addr} --topic {topic} --url"),
            url,
            "--messages",
            str(BENCH_MESSAGES),
            "--concurrency",
            "32",
        ],
        capture_output=True,
        env=cli_env(),
        timeout=CALL_TIMEOUT,
    )
    assert bench.returncode == 0, bench.stderr
    result = json.loads(bench.stdout)
    assert result["sdk"]["messages"] == BENCH_MESSAGES
    assert result["http"]["statuses"] == {"201": BENCH_MESSAGES}
    print(
        f"\nraw SDK {result['sdk']['rate']} msg/s, FastAPI service {result['http']['rate']} req/s"
    )
    assert _stored_messages(cluster.master_addr, topic) == 2 * BENCH_MESSAGES

    with httpx.Client(base_url=url, timeout=30) as client:
        reply = client.post(f"/topics/{missing}/messages", content=b"x")
        assert reply.status_code == 503, reply.text
        assert reply.headers["retry-after"] == "2"
        assert client.post("/topics/not_allowed/messages", content=b"x").status_code == 404
        assert client.post(f"/topics/{topic}/messages", content=b"").status_code == 400

        pids = [b.pid for b in cluster.brokers if b.pid is not None]
        assert len(pids) == len(cluster.brokers)
        for pid in pids:  # written but never answered: the outcome is unknown
            os.kill(pid, signal.SIGSTOP)
        try:
            reply = client.post(f"/topics/{topic}/messages", content=b"maybe")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        assert reply.status_code == 504, reply.text
        assert "outcome unknown" in reply.json()["detail"]


def _events(lines: list[bytes]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines if line.strip()]


def _worker_argv(master: str, topic: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(EXAMPLES / "consumer_worker.py"),
        *shlex.split(f"--master {master} --topic {topic} --group cookbook_workers"),
        *extra,
    ]


def test_worker_recipe_finishes_its_batch_on_sigterm(cluster: LocalCluster, topic: str) -> None:
    """SIGTERM mid-batch: the batch is finished and acked, the worker closes and exits 0; the
    next worker gets exactly the rest."""
    bodies = [f"job-{i}" for i in range(40)]
    done = run_cli(
        *shlex.split(f"produce --master {cluster.master_addr} --topic {topic}"),
        stdin="\n".join(bodies).encode(),
    )
    assert done.returncode == 0, done.stderr

    first, out, err, code = sigterm_after_first_line(
        _worker_argv(cluster.master_addr, topic, "--work-seconds", "0.2")
    )
    assert json.loads(first)["event"] == "batch"  # the first batch had started
    assert code == 0, err
    events = _events([first, *out.splitlines()])
    assert events[-1]["event"] == "stopped"
    assert events[-1]["signal"] is True
    starts = [e for e in events if e["event"] == "batch"]
    finished = [e for e in events if e["event"] == "done"]
    assert len(starts) == len(finished) >= 1  # the batch running at SIGTERM was finished
    assert [e["partition"] for e in starts] == [e["partition"] for e in finished]
    assert all(e["acked"] is True for e in finished)
    first_run = [b for e in finished for b in e["bodies"]]  # type: ignore[attr-defined]
    assert len(first_run) < len(bodies)

    rest = subprocess.run(
        _worker_argv(cluster.master_addr, topic, "--idle-exit", "5"),
        capture_output=True,
        env=cli_env(),
        timeout=CALL_TIMEOUT,
    )
    assert rest.returncode == 0, rest.stderr
    out = rest.stdout
    second_run = [b for e in _events(out.splitlines()) if e["event"] == "done" for b in e["bodies"]]  # type: ignore[attr-defined]
    assert sorted(first_run + second_run) == sorted(bodies)  # nothing lost, nothing twice
