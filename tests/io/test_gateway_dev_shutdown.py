"""Ctrl-C of ``tubemq-gateway dev`` while clients wait on it: open long polls answer at once
(200 ``empty``, as a long poll whose wait ended; no 500), an open stream ends with
``event: end`` ``{"reason": "shutdown"}`` and its unacked batch is released, the process exits
well within the server's graceful-shutdown time (10 s) and nothing it started is left.

Before, the server waited its whole grace period for the long polls and the stream, then
cancelled them: each long poll got a plain-text ``500 Internal Server Error``, the stream was
cut without an ``end`` event, and a traceback per request reached the terminal."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_dev import alive, start_dev
from tubemq_aio.gateway.config.limits import SHUTDOWN_GRACE_SECONDS

#: Runs `tubemq-gateway dev` as a process: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

_POLLS = 8


async def _long_poll(http: httpx.AsyncClient) -> httpx.Response:
    return await http.post("/v1/groups/demo-group/fetch", json={"wait_ms": 30_000})


async def _stream(http: httpx.AsyncClient, leased: asyncio.Event) -> list[tuple[str, str]]:
    """The stream's events; ``leased`` is set when its first batch (the one message) came."""
    events: list[tuple[str, str]] = []
    event = ""
    async with http.stream("GET", "/v1/groups/demo-group/stream") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():  # a cut stream raises here
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, line[6:]))
                if event == "batch":
                    leased.set()
    return events


async def test_ctrl_c_answers_long_polls_and_ends_streams_at_once(tmp_path: Path) -> None:
    dev = start_dev(["--fake"], tmp_path / "tmp")
    try:
        children = dev.descendants()
        auth = {"Authorization": f"Bearer {dev.key}"}
        async with httpx.AsyncClient(base_url=dev.url, headers=auth, timeout=60) as http:
            r = await http.post("/v1/topics/demo/messages", json={"value": "held", "key": "k"})
            assert r.status_code == 200, r.text
            leased = asyncio.Event()
            stream = asyncio.create_task(_stream(http, leased))
            # the stream leases the one batch (once after a sleep of 1 s, which a loaded
            # machine outran); the long polls then find nothing and wait
            await asyncio.wait_for(leased.wait(), 20)
            polls = [asyncio.create_task(_long_poll(http)) for _ in range(_POLLS)]
            await asyncio.sleep(1.0)
            assert not any(p.done() for p in polls)
            started = time.monotonic()
            dev.proc.send_signal(signal.SIGINT)
            answers = await asyncio.wait_for(asyncio.gather(*polls), 30)
            events = await asyncio.wait_for(stream, 30)
            status = await asyncio.to_thread(dev.proc.wait, 30)
            took = time.monotonic() - started
    finally:
        if dev.proc.poll() is None:
            dev.proc.kill()
            dev.proc.wait(10)
    out = dev.proc.stdout.read() if dev.proc.stdout else ""
    assert status == 0
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] in ("empty", "busy"), answer.text
    assert [kind for kind, _ in events] == ["batch", "end"], events
    assert json.loads(events[-1][1]) == {"reason": "shutdown"}
    assert took < SHUTDOWN_GRACE_SECONDS / 2, f"stopping took {took:.1f} s"
    assert "Traceback" not in out, out[-3000:]
    assert not [pid for pid in children if alive(pid)]
