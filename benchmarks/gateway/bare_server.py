"""The bare FastAPI app (``bare_app``) in its own uvicorn process, the way the gateway runs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

import httpx

from benchmarks.harness.proc import option_args, stop_process
from tubemq_aio.testing._ports import allocate_ports

_HOST = "127.0.0.1"


@contextlib.asynccontextmanager
async def bare_server(start_timeout: float = 60.0) -> AsyncIterator[tuple[str, int]]:
    """Serve ``bare_app`` (uvloop, httptools, one worker); yields (url of ``/bare``, pid)."""
    port = allocate_ports(1)[0]
    options = option_args(
        ("--host", _HOST),
        ("--port", port),
        ("--workers", 1),
        ("--loop", "uvloop"),
        ("--http", "httptools"),
        ("--log-level", "warning"),
    )
    app = "benchmarks.gateway.bare_app:app"
    argv = [sys.executable, "-m", "uvicorn", app, *options, "--no-access-log"]
    proc = await asyncio.create_subprocess_exec(*argv)
    url = f"http://{_HOST}:{port}/bare"
    try:
        deadline = time.monotonic() + start_timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                if proc.returncode is not None:
                    raise RuntimeError(f"the bare uvicorn exited with {proc.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.post(url, json={"value": "x"})).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the bare uvicorn did not answer in {start_timeout} s")
                await asyncio.sleep(0.1)
        yield url, proc.pid
    finally:
        await stop_process(proc, 15)
