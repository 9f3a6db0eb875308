"""The request-body deadline: :class:`BodyDeadline` on a fake ``receive``, then the whole app
over httpx's ASGI transport with bodies that stall (408 ``request_timeout``) or trickle in time.
The same against a real uvicorn is in ``tests/io/test_gateway_body_deadline.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable

import anyio
import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.support.gateway_fakes import CFG, LongPollEngine, app_client
from tubemq_aio.gateway import create_app
from tubemq_aio.gateway.http.body_deadline import BodyDeadline, BodyDeadlinePassed
from tubemq_aio.gateway.http.edge import EdgeMiddleware


def part(body: bytes, more: bool = True) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


class FakeReceive:
    """A server's ``receive``: each call answers the next of ``script``, an ASGI message
    (there at once) or ``(seconds, message)`` (after that long). Counts the calls cancelled
    while they waited."""

    def __init__(self, *script: Message | tuple[float, Message]) -> None:
        self.script = list(script)
        self.cancelled = 0

    async def __call__(self) -> Message:
        step = self.script.pop(0)
        if isinstance(step, tuple):
            try:
                await asyncio.sleep(step[0])
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return step[1]
        return step


def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any use of a timer fail the test."""

    def timed(self: BodyDeadline, waiting: Awaitable[Message]) -> Message:
        raise AssertionError("a timer was set for a message that was there")

    monkeypatch.setattr(BodyDeadline, "_timed", timed)


async def test_a_body_there_at_once_sets_no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    no_timer(monkeypatch)
    receive = BodyDeadline(FakeReceive(part(b"{}", more=False)), time.perf_counter(), 0.1)
    assert await receive() == part(b"{}", more=False)
    assert receive.done


async def test_parts_there_at_once_set_no_timer_either(monkeypatch: pytest.MonkeyPatch) -> None:
    no_timer(monkeypatch)
    receive = BodyDeadline(
        FakeReceive(part(b"{"), part(b"}", more=False)), time.perf_counter(), 0.1
    )
    assert [await receive(), await receive()] == [part(b"{"), part(b"}", more=False)]


async def test_a_stalled_body_ends_at_the_deadline_and_its_wait_is_cancelled() -> None:
    server = FakeReceive(part(b"{"), (30.0, part(b"}", more=False)))
    receive = BodyDeadline(server, time.perf_counter(), 0.3)
    assert await receive() == part(b"{")
    started = time.monotonic()
    with pytest.raises(BodyDeadlinePassed):
        await receive()
    assert 0.2 < time.monotonic() - started < 10.0
    assert server.cancelled == 1
    assert not receive.done


async def test_the_deadline_is_for_the_whole_body_not_each_part() -> None:
    # every part comes 0.25 s after the one before, well within 0.9 s; the fourth is past it
    server = FakeReceive(*[(0.25, part(b"x")) for _ in range(3)], (0.25, part(b"", False)))
    receive = BodyDeadline(server, time.perf_counter(), 0.9)
    for _ in range(3):
        assert await receive() == part(b"x")
    with pytest.raises(BodyDeadlinePassed):
        await receive()


async def test_the_deadline_counts_from_the_request_start() -> None:
    receive = BodyDeadline(FakeReceive((5.0, part(b"{}"))), time.perf_counter() - 10, 5.0)
    with pytest.raises(BodyDeadlinePassed):
        await receive()


async def test_a_body_in_parts_within_the_deadline_arrives_whole() -> None:
    server = FakeReceive((0.05, part(b'{"a"')), (0.05, part(b":1")), (0.05, part(b"}", False)))
    receive = BodyDeadline(server, time.perf_counter(), 2.0)
    got = [await receive() for _ in range(3)]
    assert b"".join(m["body"] for m in got) == b'{"a":1}'
    assert receive.done


@pytest.mark.parametrize("last", [part(b"{}", more=False), {"type": "http.disconnect"}])
async def test_after_the_body_or_a_disconnect_receive_is_not_timed(last: Message) -> None:
    # a streaming route awaits receive to learn of a disconnect, longer than body_timeout
    server = FakeReceive(last, (0.4, {"type": "http.disconnect"}))
    receive = BodyDeadline(server, time.perf_counter(), 0.1)
    assert await receive() == last
    assert receive.done
    assert await receive() == {"type": "http.disconnect"}


async def test_a_cancelled_wait_is_cancelled_not_timed_out() -> None:
    server = FakeReceive((30.0, part(b"{}", more=False)))
    receive = BodyDeadline(server, time.perf_counter(), 10.0)
    task = asyncio.ensure_future(receive())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.cancelled == 1


async def test_a_receive_that_raises_raises_through_both_paths() -> None:
    async def broken() -> Message:
        raise OSError("gone")

    async def broken_later() -> Message:
        await asyncio.sleep(0.01)
        raise OSError("gone later")

    with pytest.raises(OSError, match="gone"):
        await BodyDeadline(broken, time.perf_counter(), 1.0)()
    with pytest.raises(OSError, match="gone later"):
        await BodyDeadline(broken_later, time.perf_counter(), 1.0)()


async def test_a_receive_that_is_not_a_coroutine_is_timed_whole() -> None:
    loop = asyncio.get_running_loop()
    pending: asyncio.Future[Message] = loop.create_future()
    receive = BodyDeadline(lambda: pending, time.perf_counter(), 0.2)
    with pytest.raises(BodyDeadlinePassed):
        await receive()
    ready: asyncio.Future[Message] = loop.create_future()
    ready.set_result(part(b"{}", more=False))
    assert await BodyDeadline(lambda: ready, time.perf_counter(), 0.2)() == part(b"{}", False)


# ---- the edge layer -----------------------------------------------------------------------------

SCOPE = {
    "type": "http",
    "method": "POST",
    "path": "/x",
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"10")],
}


async def edge_answers(app: ASGIApp, receive: FakeReceive) -> list[Message]:
    """What the edge layer (``body_timeout`` 0.2 s) around ``app`` sends for ``receive``."""
    gateway = create_app(CFG).state.gateway
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await EdgeMiddleware(app, gateway, max_bytes=1024, body_timeout=0.2)(SCOPE, receive, send)
    return sent


async def read_body(receive: Receive) -> None:
    while (await receive()).get("more_body", False):
        pass


async def test_the_edge_answers_408_for_a_deadline_raised_in_a_task_group() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(read_body, receive)

    sent = await edge_answers(app, FakeReceive(part(b"{"), (30.0, part(b"}", False))))
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    assert b'"request_timeout"' in sent[1]["body"]


async def test_a_deadline_after_the_answer_began_just_ends_the_request() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await read_body(receive)

    sent = await edge_answers(app, FakeReceive(part(b"{"), (30.0, part(b"}", False))))
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}]


# ---- the app ------------------------------------------------------------------------------------


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    config = dataclasses.replace(CFG, body_timeout=0.5, noop_route=True)
    async with app_client(LongPollEngine({"g1": "clustering"}), config) as c:
        yield c


async def body(pause: float, *parts: bytes) -> AsyncIterator[bytes]:
    for piece in parts:
        yield piece
        await asyncio.sleep(pause)


def assert_408(r: httpx.Response) -> None:
    assert r.status_code == 408, r.text
    assert r.headers["connection"] == "close"
    assert r.json() == {
        "error": {
            "code": "request_timeout",
            "message": "the request body was not complete within 0.5 seconds",
            "retriable": True,
        }
    }


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
async def test_a_stalled_body_is_408(client: httpx.AsyncClient, length: bool) -> None:
    headers = {"content-type": "application/json"}
    if length:
        headers["content-length"] = "100"
    started = time.monotonic()
    r = await client.post("/v1/noop", content=body(30.0, b'{"va'), headers=headers)
    assert_408(r)
    assert time.monotonic() - started < 5
    metrics = (await client.get("/metrics")).text
    assert 'error_answers_total{cause="BodyTimeoutError",code="request_timeout"} 1.0' in metrics
    route = "/v1/noop" if length else "unmatched"  # a chunked body is read before routing
    assert f'requests_total{{method="POST",route="{route}",status="408"}} 1.0' in metrics


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
async def test_a_body_in_parts_within_the_deadline_is_served(
    client: httpx.AsyncClient, length: bool
) -> None:
    raw = b'{"value": "in parts"}'
    headers = {"content-type": "application/json"}
    if length:
        headers["content-length"] = str(len(raw))
    parts = [raw[i : i + 6] for i in range(0, len(raw), 6)]
    r = await client.post("/v1/noop", content=body(0.05, *parts), headers=headers)
    assert r.status_code == 200, r.text
    r = await client.post("/v1/noop", json={"value": "whole"})
    assert r.status_code == 200, r.text


async def test_a_fetch_long_poll_past_the_deadline_is_not_cut(client: httpx.AsyncClient) -> None:
    # the body is complete at once; the fetch then watches receive for a disconnect for 1.5 s
    started = time.monotonic()
    r = await client.post("/v1/groups/g1/fetch", json={"wait_ms": 1500})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "empty"
    assert time.monotonic() - started >= 1.4
