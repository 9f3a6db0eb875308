"""The examples run where the quickstart leaves a new user: ``$TUBEMQ_AIO_MASTER`` exported,
nothing else. They took ``--masters`` (required) and ``$TUBEMQ_MASTERS`` (a ``KeyError``
traceback when unset), names the command-line tool and the guides use nowhere."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from tests.support.cli_run import CALL_TIMEOUT, cli_env
from tests.support.example_scripts import EXAMPLES, load_example
from tubemq_aio import Producer
from tubemq_aio.testing import FakeCluster


async def test_the_service_without_a_master_says_which_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TUBEMQ_AIO_MASTER", raising=False)
    app = load_example("fastapi_service").app
    with pytest.raises(RuntimeError, match=r"set TUBEMQ_AIO_MASTER"):
        async with app.router.lifespan_context(app):
            pass


@pytest.mark.system
async def test_the_worker_takes_its_master_from_the_environment() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            await producer.send("demo", b"job")
        env = dict(cli_env(), TUBEMQ_AIO_MASTER=cluster.master_addr)
        argv = [sys.executable, str(EXAMPLES / "consumer_worker.py")]
        done = await asyncio.to_thread(
            subprocess.run,
            [*argv, "--topic", "demo", "--group", "workers", "--idle-exit", "0.5"],
            capture_output=True,
            env=env,
            timeout=CALL_TIMEOUT,
        )
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        assert [e["bodies"] for e in events if e["event"] == "done"] == [["job"]]

        missing = await asyncio.to_thread(
            subprocess.run,
            [*argv, "--topic", "demo", "--group", "workers"],
            capture_output=True,
            env=cli_env(),
            timeout=CALL_TIMEOUT,
        )
        assert missing.returncode == 2
        assert b"--master HOST:PORT or set $TUBEMQ_AIO_MASTER" in missing.stderr
