"""A real uvicorn server (in this process, loopback): a client that closes its connection in the
middle of a 30 s long poll ends the poll at once, and a batch leased for it is released."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery, Lease
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.models import Message
from tubemq_aio.testing import wait_until
from tubemq_aio.testing._ports import allocate_ports

KEY = "k-disconnect-1"
CFG = GatewayConfig.from_mapping(
    {
        "masters": "127.0.0.1:1",
        "redis": "redis://127.0.0.1:1/0",
        "secret": "0123456789abcdef0123",
        "groups": [{"name": "g1", "topics": ["demo"]}],
        "keys": [{"key": KEY, "scopes": ["consume:*"]}],
    }
)


@dataclass
class SlowEngine:
    """One partition; a fetch long-polls until a message is there, then 'reads' it slowly."""

    pending: list[bytes] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    read_gate: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0
    reading: int = 0
    holder: str | None = None
    released: int = 0

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def fetch(self, query: FetchQuery, **_kw: Any) -> FetchOutcome:
        wait_ms = query.wait_ms
        if not self.pending:
            self.waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_ms / 1000):
                        await self.arrived.wait()
            finally:
                self.waiting -= 1
        if not self.pending or self.holder is not None:
            return FetchOutcome("empty", None, ())
        lid = secrets.token_hex(8)
        self.holder = lid
        self.reading += 1
        try:
            await self.read_gate.wait()  # the broker read
        except asyncio.CancelledError:
            self.holder = None
            self.released += 1
            raise
        finally:
            self.reading -= 1
        body = self.pending[0]
        message = Message(topic="demo", body=body, message_id=1, partition_key="1:demo:0")
        return FetchOutcome(
            "ok", Lease(LeaseKey(query.group, "c", "1:demo:0", lid), 0, 0), (message,)
        )

    async def settle(self, lease: Any, action: str, *, delay_ms: int = 0) -> str:
        if self.holder == lease.lease_id:
            self.holder = None
            self.released += 1
        return "released"

    def stats(self) -> dict[str, int]:
        return {"long_poll_waiters": self.waiting}


@contextlib.asynccontextmanager
async def serve(engine: SlowEngine) -> AsyncIterator[int]:
    app = create_app(CFG, engine_factory=lambda _cfg: engine)  # type: ignore[arg-type,return-value]
    port = allocate_ports(1)[0]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started, 20, "server.started")
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 20)


async def open_fetch(port: int, body: dict[str, Any]) -> asyncio.StreamWriter:
    """Send a fetch on a raw connection and return its writer (the answer is never read)."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = json.dumps(body).encode()
    writer.write(
        b"POST /v1/groups/g1/fetch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
        + raw
    )
    await writer.drain()
    return writer


@pytest.mark.parametrize("how", ["close", "reset"])
async def test_long_poll_ends_when_the_client_goes(how: str) -> None:
    engine = SlowEngine()
    async with serve(engine) as port:
        writer = await open_fetch(port, {"wait_ms": 30000})
        await wait_until(lambda: engine.waiting == 1, 10, "engine.waiting == 1")
        started = time.monotonic()
        if how == "close":
            writer.close()
        else:
            writer.transport.abort()
        await wait_until(
            lambda: engine.waiting == 0, 10, "engine.waiting == 0"
        )  # well before the 30 s poll would end
        assert time.monotonic() - started < 25
        # a message arriving now is not leased for the gone client
        engine.pending.append(b"m1")
        engine.arrived.set()
        await asyncio.sleep(0.1)
        assert engine.holder is None


async def test_batch_leased_for_a_gone_client_is_released_at_once() -> None:
    engine = SlowEngine(pending=[b"m1"])
    async with serve(engine) as port:
        writer = await open_fetch(port, {})
        await wait_until(lambda: engine.reading == 1, 10, "engine.reading == 1")
        assert engine.holder is not None
        writer.transport.abort()
        await wait_until(lambda: engine.holder is None, 10, "engine.holder is None")
        assert engine.released == 1
