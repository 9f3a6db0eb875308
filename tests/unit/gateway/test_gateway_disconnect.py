"""A fetch whose HTTP client leaves: the long poll stops, a batch leased for it is released.

The app is driven through raw ASGI calls whose ``receive`` answers ``http.disconnect`` when the
test says so (what uvicorn does when the connection closes); the real-server check is in
``tests/io/test_gateway_disconnect_uvicorn.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest
from fastapi import FastAPI

from tests.support.gateway_fakes import READER, FakeEngine, fake_app
from tubemq_aio.gateway.engine.data import FetchOutcome, FetchQuery
from tubemq_aio.gateway.engine.port import SettleAction, SettleResult
from tubemq_aio.gateway.engine.waker import Waker
from tubemq_aio.gateway.http.disconnect import run_unless_disconnected
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.supervisor import Supervisor
from tubemq_aio.testing import wait_until

Receive = Callable[[], Awaitable[dict[str, Any]]]


class PollingEngine(FakeEngine):
    """FakeEngine whose fetch long-polls (counting waiters) and can be held after leasing."""

    def __init__(self) -> None:
        super().__init__({"g1": "clustering", "gb": "broadcast", "other": "clustering"})
        self.waiting = 0
        self.hold_after_lease: asyncio.Event | None = None
        self.leased = asyncio.Event()
        self.actions: list[str] = []

    async def fetch(self, query: FetchQuery, **kw: Any) -> FetchOutcome:
        out = await super().fetch(query, **kw)
        if out.status == "ok":
            self.leased.set()
            if self.hold_after_lease is not None:
                try:  # "the broker read": a cancel here must give the lease back
                    await self.hold_after_lease.wait()
                except asyncio.CancelledError:
                    assert out.lease is not None
                    await self.settle(out.lease.key, "release")
                    raise
            return out
        if query.wait_ms == 0:
            return out
        self.waiting += 1
        try:
            await asyncio.sleep(query.wait_ms / 1000)
        finally:
            self.waiting -= 1
        return await super().fetch(query, **kw)

    async def settle(
        self, lease: LeaseKey, action: SettleAction, *, delay_ms: int = 0
    ) -> SettleResult:
        self.actions.append(action)
        return await super().settle(lease, action, delay_ms=delay_ms)

    def held(self) -> list[str]:
        return [pk for (_g, _s, pk), part in self.parts.items() if part.lease_id is not None]


class Call:
    """One fetch through the ASGI app; ``leave()`` makes ``receive`` report a disconnect."""

    def __init__(self, app: FastAPI, body: dict[str, Any]) -> None:
        self.app = app
        self.body = json.dumps(body).encode()
        self.left = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None

    async def _receive(self) -> dict[str, Any]:
        if self.body:
            body, self.body = self.body, b""
            return {"type": "http.request", "body": body, "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def start(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/groups/g1/fetch",
            "raw_path": b"/v1/groups/g1/fetch",
            "query_string": b"",
            "root_path": "",
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "headers": [
                (b"content-type", b"application/json"),
                (b"authorization", READER["Authorization"].encode()),
            ],
        }
        self.task = asyncio.create_task(self.app(scope, self._receive, self._send))  # type: ignore[arg-type]

    @property
    def status(self) -> int:
        return int(next(m["status"] for m in self.sent if m["type"] == "http.response.start"))

    def json(self) -> dict[str, Any]:
        raw = b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        return cast(dict[str, Any], json.loads(raw))


@pytest.fixture
async def app_engine() -> AsyncIterator[tuple[FastAPI, PollingEngine]]:
    engine = PollingEngine()
    app = fake_app(engine)
    async with app.router.lifespan_context(app):
        yield app, engine


async def test_long_poll_stops_when_the_client_leaves(
    app_engine: tuple[FastAPI, PollingEngine],
) -> None:
    app, engine = app_engine
    call = Call(app, {"wait_ms": 30000})
    call.start()
    await wait_until(lambda: engine.waiting == 1, 5, "engine.waiting == 1")
    call.left.set()
    assert call.task is not None
    await asyncio.wait_for(call.task, 5)  # not 30 s: the poll was cut
    assert engine.waiting == 0
    assert call.status == 499  # nobody reads it; the access log and metrics do
    assert engine.held() == []


async def test_a_long_poll_whose_client_stays_gets_its_batch(
    app_engine: tuple[FastAPI, PollingEngine],
) -> None:
    app, engine = app_engine
    call = Call(app, {"wait_ms": 200})
    call.start()
    await wait_until(lambda: engine.waiting == 1, 5, "engine.waiting == 1")
    engine.add("1:demo:0", b"late")
    assert call.task is not None
    await asyncio.wait_for(call.task, 5)
    assert call.status == 200
    assert call.json()["status"] == "ok"
    assert engine.held() == ["1:demo:0"]


async def test_lease_taken_then_client_leaves_during_the_read(
    app_engine: tuple[FastAPI, PollingEngine],
) -> None:
    app, engine = app_engine
    engine.add("1:demo:0", b"a", b"b")
    engine.hold_after_lease = asyncio.Event()
    call = Call(app, {})
    call.start()
    await asyncio.wait_for(engine.leased.wait(), 5)
    assert engine.held() == ["1:demo:0"]
    call.left.set()
    assert call.task is not None
    await asyncio.wait_for(call.task, 5)
    assert engine.held() == []  # released by the engine's own cancel path, not left to expire
    engine.hold_after_lease = None
    again = Call(app, {})
    again.start()
    assert again.task is not None
    await asyncio.wait_for(again.task, 5)
    reply = again.json()
    assert reply["status"] == "ok"
    assert reply["lease"]["redelivery"] == 0
    assert [m["value"] for m in reply["messages"]] == ["a", "b"]


async def test_lease_returned_as_the_client_leaves_is_released(
    app_engine: tuple[FastAPI, PollingEngine],
) -> None:
    """The batch is ready at the same moment the disconnect arrives: the route releases it."""
    app, engine = app_engine
    engine.add("1:demo:0", b"a")
    call = Call(app, {})
    call.left.set()  # receive answers the disconnect right after the body
    call.start()
    assert call.task is not None
    await asyncio.wait_for(call.task, 5)
    assert call.status == 499
    assert engine.actions == ["release"]
    assert engine.held() == []


async def _stubborn() -> str:
    """Work that finishes with a result even when cancelled (a lease taken as the cancel came)."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return "lease"
    raise AssertionError("unreachable")


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@pytest.mark.parametrize("how", ["request_cancelled", "client_left"])
async def test_a_result_nobody_will_read_is_abandoned(how: str) -> None:
    abandoned: list[str] = []
    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def abandon(result: str) -> None:
        abandoned.append(result)

    running = run_unless_disconnected(receive, _stubborn(), abandon)
    task = asyncio.create_task(running)
    await asyncio.sleep(0.01)
    if how == "request_cancelled":
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        left.set()
        assert await asyncio.wait_for(task, 5) == (None, True)
    assert abandoned == ["lease"]


async def test_run_unless_disconnected_passes_errors_through() -> None:
    async def work() -> str:
        raise ValueError("boom")

    async def abandon(_result: str) -> None:
        raise AssertionError("nothing to abandon")

    with pytest.raises(ValueError, match="boom"):
        await run_unless_disconnected(_never, work(), abandon)


async def test_a_server_that_never_reports_a_disconnect_still_answers() -> None:
    calls = 0

    async def receive() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"type": "http.request", "body": b"", "more_body": False}

    async def work() -> str:
        await asyncio.sleep(0.05)
        return "ok"

    async def abandon(_result: str) -> None:
        raise AssertionError("nothing to abandon")

    assert await run_unless_disconnected(receive, work(), abandon) == ("ok", False)
    assert calls <= 8  # the watch gave up instead of spinning


async def test_a_waiter_that_leaves_frees_its_registration() -> None:
    """Long polls that time out or are cancelled (their client left) leave no waiter and no
    per-key event behind, whatever the order they leave in."""
    waker = Waker(cast(Any, None), max_waiters=10, tasks=Supervisor("test-gateway"))  # no Redis
    await waker.wait("g|b:once", 1)  # timed out
    polls = [asyncio.create_task(waker.wait(f"g|b:{i % 2}", 30_000)) for i in range(4)]
    await wait_until(lambda: waker.waiting == 4, 5, "waker.waiting == 4")
    waker.notify("g|b:0")  # two wake up; a new waiter on the same key arrives meanwhile
    late = asyncio.create_task(waker.wait("g|b:0", 30_000))
    await asyncio.gather(polls[0], polls[2])
    for task in (polls[1], polls[3], late):
        task.cancel()
    await asyncio.gather(*polls, late, return_exceptions=True)
    assert waker.waiting == 0
    assert waker._events == {}
    assert waker._per_key == {}
