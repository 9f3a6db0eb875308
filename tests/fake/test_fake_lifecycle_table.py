"""Every public call and iterator of the three clients × every lifecycle state (issue 30,
fault 3): one table, the answers ``docs/api.md`` ("Lifecycle answers") documents.

The rule: a call that talks to the cluster (sends, reads, commits, connects, iterators) is
served only while the client runs and raises :class:`ClientClosedError` in every other state
(new, starting, closing, closed); inspection (counters, assignment, positions, metrics) and the
local pause/resume answer in every state; ``start()`` joins or starts a client that was not
closed, and ``close()`` always succeeds. The regression it started from: ``async for`` over a
consumer after ``close()`` ended without an error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.support.lifecycle_clients import CLIENTS
from tubemq_aio import ClientBalancedConsumer, ClientClosedError, Consumer, Producer
from tubemq_aio._client import AsyncLifecycle
from tubemq_aio.testing import FakeCluster, Fault, wait_until

STATES = ("new", "starting", "running", "closing", "closed")
#: How long a call that is served may wait before the table calls it "waits" (e.g. a read of
#: an empty topic, or ``run()`` of a running consumer, which returns only at close).
PATIENCE = 0.3

#: The answers: served ("ok", or "waits" for a call that blocks while there is nothing to do),
#: refused as closed, or another error (named by its type).
SERVED = frozenset({"ok", "waits"})

Probe = Callable[[Any], Awaitable[object]]


async def _first(iterator: AsyncIterator[object]) -> object:
    try:
        return await anext(iterator)
    finally:
        with contextlib.suppress(Exception):
            await iterator.aclose()  # type: ignore[attr-defined]


async def _send_nowait(producer: Producer) -> object:
    future = producer.send_nowait("t", b"x")  # raises at once when refused
    return await future


async def _run(consumer: Consumer) -> None:
    async def handler(message: object) -> None:
        return None

    await consumer.run(handler)


async def _connect_then_disconnect(consumer: ClientBalancedConsumer, key: str) -> None:
    await consumer.connect(key)
    await consumer.disconnect(key)


def _attribute(name: str) -> Callable[[Any], object]:
    def read(client: Any) -> object:
        return getattr(client, name)

    return read


def _sync(call: Callable[[Any], object]) -> Probe:
    async def probe(client: Any) -> object:
        return call(client)

    return probe


#: Calls that talk to the cluster: served only while running.
IO_CALLS: dict[str, dict[str, Probe]] = {
    "producer": {
        "send": lambda p: p.send("t", b"x"),
        "send_many": lambda p: p.send_many("t", [b"x"]),
        "send_nowait": _send_nowait,
        "publish": lambda p: p.publish(["t"]),
    },
    "consumer": {
        "getmany": lambda c: c.getmany(timeout=0),
        "async for": lambda c: _first(aiter(c)),
        "messages()": lambda c: _first(c.messages()),
        "run": _run,
        "commit": lambda c: c.commit(),
    },
    "cb-consumer": {
        "getmany": lambda c: c.getmany(timeout=0),
        "fetch": lambda c: c.fetch(timeout=0),
        "async for": lambda c: _first(aiter(c)),
        "messages()": lambda c: _first(c.messages()),
        "commit": lambda c: c.commit(),
        "partitions": lambda c: c.partitions(),
        "connect": lambda c: c.connect("1:t:0"),
        "disconnect": lambda c: _connect_then_disconnect(c, "1:t:1"),
        "read_at": lambda c: c.read_at("1:t:2", 0),
        "read_next": lambda c: c.read_next("1:t:2", 0),
        "peek_at": lambda c: c.peek_at("1:t:2", 0),
        "offset_bounds": lambda c: c.offset_bounds("1:t:2"),
    },
}

#: Inspection and local calls: answered in every state.
LOCAL_CALLS: dict[str, dict[str, Probe]] = {
    "producer": {
        name: _sync(_attribute(name))
        for name in ("sent", "failed", "cancelled", "retried", "in_flight", "topics", "closed")
    }
    | {"metrics": _sync(lambda p: p.metrics())},
    "consumer": {
        "assignment": _sync(lambda c: c.assignment()),
        "positions": _sync(lambda c: c.positions()),
        "client_id": _sync(lambda c: c.client_id),
        "closed": _sync(lambda c: c.closed),
        "stats": _sync(lambda c: c.stats),
        "pause": _sync(lambda c: c.pause("t")),
        "resume": _sync(lambda c: c.resume("t")),
    },
    "cb-consumer": {
        "assignment": _sync(lambda c: c.assignment()),
        "positions": _sync(lambda c: c.positions()),
        "client_id": _sync(lambda c: c.client_id),
        "closed": _sync(lambda c: c.closed),
        "stats": _sync(lambda c: c.stats),
    },
}


def expected(state: str, call: str, local: bool) -> frozenset[str]:
    """The documented answer of ``call`` in ``state``."""
    if local or state == "running":
        return SERVED
    if call == "commit" and state == "closing":  # e.g. from on_revoked, until the release
        return SERVED
    return frozenset({"ClientClosedError"})


async def answer(probe: Probe, client: Any) -> str:
    """Run one probe: "ok", "waits" (still blocked after PATIENCE) or the error's type name."""
    task = asyncio.ensure_future(probe(client))
    done, _ = await asyncio.wait({task}, timeout=PATIENCE)
    if not done:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        return "waits"
    exc = task.exception()
    return "ok" if exc is None else type(exc).__name__


@contextlib.asynccontextmanager
async def in_state(kind: str, state: str, cluster: FakeCluster) -> AsyncIterator[AsyncLifecycle]:
    """A client of ``kind`` held in ``state`` while the body runs; closed afterwards."""
    factory, register, close = CLIENTS[kind]
    client = factory(cluster.master_addr)
    pending: asyncio.Future[None] | None = None
    try:
        if state == "starting":
            cluster.inject(register, Fault.no_answer(), times=None)
            before = cluster.requests(register)
            pending = asyncio.ensure_future(client.start())
            await wait_until(lambda: cluster.requests(register) > before, 5, "register sent")
        elif state in ("running", "closing", "closed"):
            await client.start()
        if state == "closing":
            cluster.inject(close, Fault.no_answer(), times=None)
            before = cluster.requests(close)
            pending = asyncio.ensure_future(client.close())
            await wait_until(lambda: cluster.requests(close) > before, 5, "close sent")
        elif state == "closed":
            await client.close()
        assert client._lifecycle_state() == state
        yield client
    finally:
        cluster.clear_faults()
        if state == "closing":
            # The master swallowed the close: end that call now rather than at rpc_timeout
            # (3 s at least; a close that outlives its RPC is test_fake_lifecycle's subject).
            cluster.drop_connections()
        await asyncio.wait_for(client.close(), 15)
        if pending is not None:
            with contextlib.suppress(ClientClosedError):
                await asyncio.wait_for(pending, 15)


@pytest.fixture(name="cluster")
async def cluster_fixture() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(topics={"t": 3}) as cluster:
        yield cluster


@pytest.mark.timeout(120)
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", sorted(CLIENTS))
async def test_every_call_gives_the_documented_answer_in_every_state(
    cluster: FakeCluster, kind: str, state: str
) -> None:
    wrong: list[str] = []
    async with in_state(kind, state, cluster) as client:
        for local, calls in ((False, IO_CALLS[kind]), (True, LOCAL_CALLS[kind])):
            for name, probe in calls.items():
                got = await answer(probe, client)
                if got not in expected(state, name, local):
                    wrong.append(
                        f"{name}: {got}, documented {sorted(expected(state, name, local))}"
                    )
                assert client._lifecycle_state() == state, name  # the probe left it there
    assert wrong == [], f"{kind} {state}: " + "; ".join(wrong)


@pytest.mark.parametrize("kind", ["consumer", "cb-consumer"])
async def test_a_loop_running_when_close_is_called_ends_quietly(
    cluster: FakeCluster, kind: str
) -> None:
    """The other half of the iterator rule: a loop already running ends without an error."""
    async with in_state(kind, "running", cluster) as client:
        got: list[object] = []

        async def loop() -> None:
            async for message in client:  # type: ignore[attr-defined]
                got.append(message)

        task = asyncio.ensure_future(loop())
        await asyncio.sleep(0.2)
        await client.close()
        await asyncio.wait_for(task, 5)  # ended, no ClientClosedError
        assert got == []


@pytest.mark.parametrize("kind", ["producer", "consumer", "cb-consumer"])
async def test_start_joins_or_refuses_by_state(cluster: FakeCluster, kind: str) -> None:
    """``start()``: a new or starting client starts (joins the start), a running one returns,
    a closing or closed one raises ClientClosedError; ``close()`` always returns."""
    for state in STATES:
        async with in_state(kind, state, cluster) as client:
            if state == "starting":
                cluster.clear_faults()  # the register is answered from now on
            got = await answer(lambda c: asyncio.wait_for(c.start(), 10), client)
            if state in ("new", "running"):
                assert got == "ok", (state, got)
            elif state == "starting":
                # The first register went unanswered: the start waits for its retry rounds.
                assert got in SERVED, (state, got)
            else:
                assert got == "ClientClosedError", (state, got)
            assert await answer(lambda c: c.close(), client) in SERVED
