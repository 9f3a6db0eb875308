"""Headless Chromium (Debian's ``chromium`` package) driven over its DevTools protocol: open a
page, evaluate JavaScript in it, take a PNG screenshot. A small client on ``websockets``; no
browser driver package needed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shlex
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import websockets

from tubemq_aio.testing import wait_until
from tubemq_aio.testing._ports import allocate_ports


class Tab:
    """One page of the browser, spoken to over its DevTools web socket."""

    def __init__(self, socket: websockets.ClientConnection) -> None:
        self.socket = socket
        self._ids = itertools.count(1)

    async def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are skipped).

        Raises:
            AssertionError: the browser answered with an error.
        """
        call_id = next(self._ids)
        await self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        async with asyncio.timeout(timeout):
            while True:
                reply = json.loads(await self.socket.recv())
                if reply.get("id") == call_id:
                    assert "error" not in reply, reply
                    result: dict[str, Any] = reply["result"]
                    return result

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        got = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in got, got
        return got["result"].get("value")

    async def screenshot(self) -> bytes:
        """A PNG of the page as it is shown."""
        return base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"])


@asynccontextmanager
async def chromium_tab(url: str, *, width: int = 1100, height: int = 900) -> AsyncIterator[Tab]:
    """A headless Chromium showing ``url``; the browser and its profile are removed after.

    Raises:
        AssertionError: ``chromium`` is not installed (Debian package ``chromium``; ``make
            test`` installs it) or its DevTools endpoint did not come up.
    """
    binary = shutil.which("chromium")
    assert binary is not None, "headless Chromium is needed: apt-get install chromium"
    port = allocate_ports(1)[0]
    # Chromium's helpers (zygote, renderers, crash handler) may outlive its main process by a
    # moment and still write to the profile: the whole process group is stopped first, and a
    # straggler's file left in the profile does not fail the test.
    with tempfile.TemporaryDirectory(
        prefix="tubemq-chromium-", ignore_cleanup_errors=True
    ) as profile:
        proc = await asyncio.create_subprocess_exec(
            binary,
            *shlex.split("--headless --no-sandbox --disable-gpu --no-first-run"),
            "--disable-dev-shm-usage",
            f"--remote-debugging-port={port}",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
                targets: list[dict[str, Any]] = []

                async def listed() -> bool:
                    nonlocal targets
                    try:
                        targets = (await c.get("/json/list")).json()
                    except httpx.HTTPError:
                        return False
                    return any(t.get("type") == "page" for t in targets)

                await wait_until(listed, 60, "Chromium's DevTools endpoint")
            page = next(t for t in targets if t.get("type") == "page")
            async with websockets.connect(page["webSocketDebuggerUrl"], max_size=None) as ws:
                tab = Tab(ws)
                await tab.call("Page.enable")
                await tab.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                await tab.call("Page.navigate", url=url)

                async def loaded() -> bool:
                    state = await tab.evaluate(
                        "location.href.startsWith('http') && document.readyState"
                    )
                    return bool(state == "complete")

                await wait_until(loaded, 60, f"Chromium loaded {url.split('#')[0]}")
                yield tab
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # any helper still running
