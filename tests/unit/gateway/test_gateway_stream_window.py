"""The stream's consume loop and its response on a scripted engine (faults a real one cannot be
made to show on cue): the window of unacked batches, what frees it, how the stream ends, and a
cancellation at each of its awaits (and the client leaving, stalling or its request cancelled)
ending it promptly with every unacked lease released."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.support.gateway_fakes import BASE_CONFIG
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.config.stream_config import StreamConfig
from tubemq_aio.gateway.engine import streams
from tubemq_aio.gateway.engine.data import FetchOutcome, LagEntry, LagReport, Lease, Position
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.engine.streams import BatchStream, StreamEvent, StreamHub
from tubemq_aio.gateway.errors import (
    InvalidRequestError,
    LeaseStaleError,
    StoreUnavailableError,
    TooManyWaitersError,
)
from tubemq_aio.gateway.http.deps import Gateway
from tubemq_aio.gateway.http.routes.stream import EventStreamResponse
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.models import Message

HOLDER = "r-test/stream-1"


async def _forever() -> None:
    """Block until cancelled."""
    await asyncio.get_running_loop().create_future()


@dataclass
class ScriptEngine:
    """Fetches answer from ``script`` (a lease id, an exception, ``"throttled"``, ``"block"`` or
    ``"swallow"``, which blocks and returns "empty" when cancelled, or ``"wait"``, a long poll
    that finds nothing);
    every settle, lag and fetch is recorded; ``block_settle`` / ``block_lag`` hang them."""

    script: list[object] = field(default_factory=list)
    settles: list[tuple[str, str]] = field(default_factory=list)
    fetches: int = 0
    lags: int = 0
    block_settle: bool = False
    block_lag: bool = False
    mine: set[str] = field(default_factory=set)  # partitions the lag report shows as ours
    acked: set[str] = field(default_factory=set)  # partitions whose batch was acked elsewhere

    async def fetch(self, wait_ms: int) -> FetchOutcome:
        self.fetches += 1
        step = self.script.pop(0) if self.script else "block"
        if step == "block":
            await _forever()
        if step == "wait":  # a long poll that finds nothing
            await asyncio.sleep(wait_ms / 1000)
            return FetchOutcome("empty", None, ())
        if step == "swallow":  # a library that drops the cancel (3.11's asyncio.wait_for)
            try:
                await _forever()
            except asyncio.CancelledError:
                return FetchOutcome("empty", None, ())
        if isinstance(step, Exception):
            raise step
        if step == "throttled":
            return FetchOutcome("throttled", None, (), retry_after_ms=60_000)
        lease_id = str(step)
        self.mine.add(f"p-{lease_id}")
        lease = Lease(LeaseKey("g", "c", f"p-{lease_id}", lease_id), 0, 0)
        message = Message(topic="t", body=lease_id.encode(), message_id=1, partition_key="p")
        return FetchOutcome("ok", lease, (message,), position=Position(0, 1, 1, 1))

    async def settle(self, lease: Any, action: str, *, delay_ms: int = 0) -> str:
        self.settles.append((lease.lease_id, action))
        if self.block_settle:
            await _forever()
        if lease.lease_id.startswith("stale"):
            raise LeaseStaleError("already acked")
        return "released"

    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport:
        self.lags += 1
        if self.block_lag:
            await _forever()
        entries = tuple(
            LagEntry(pk, 1 if pk in self.acked else 0, 1, 0, lease_holder=HOLDER)
            for pk in sorted(self.mine)
        )
        return LagReport(group, "c", entries, 0)

    def released(self) -> list[str]:
        return sorted(lid for lid, action in self.settles if action == "release")


def _stream(
    engine: ScriptEngine, window: int = 2, lease_ms: int = 60_000, **cfg: Any
) -> BatchStream:
    settings = StreamConfig(**{"max_seconds": 60.0, "release_timeout": 2.0, **cfg})
    return BatchStream(
        cast(ConsumeEngine, engine), engine.fetch, "g", None, HOLDER, window, lease_ms, settings
    )


def _retriable(exc: Exception) -> bool | None:
    if isinstance(exc, StoreUnavailableError | InvalidRequestError):
        return exc.retriable
    return None


async def _events(stream: BatchStream, count: int, timeout: float = 5.0) -> list[StreamEvent]:
    async with asyncio.timeout(timeout):
        return [await stream.events.get() for _ in range(count)]


async def _quiet(stream: BatchStream, seconds: float) -> bool:
    """Whether no event comes within ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            await stream.events.get()
    except TimeoutError:
        return True
    return False


async def test_a_full_window_waits_and_a_settle_here_frees_a_slot_at_once() -> None:
    engine = ScriptEngine(["a", "b", "c"])
    stream = _stream(engine, window=2, probe_interval_ms=60_000)
    task = asyncio.create_task(stream.run(_retriable))
    got = await _events(stream, 2)
    assert [e.outcome.lease.lease_id for e in got if e.outcome and e.outcome.lease] == ["a", "b"]
    assert await _quiet(stream, 0.3)
    assert engine.fetches == 2  # no fetch while the window is full
    stream.settled("a")
    (third,) = await _events(stream, 1)
    assert third.outcome is not None
    assert third.outcome.lease is not None
    assert third.outcome.lease.lease_id == "c"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert engine.released() == ["b", "c"]  # the unacked ones, not the settled one


async def test_a_probe_frees_leases_settled_elsewhere_and_a_lease_that_ran_out() -> None:
    engine = ScriptEngine(["a", "b"])
    stream = _stream(engine, window=1, probe_interval_ms=50)
    task = asyncio.create_task(stream.run(_retriable))
    await _events(stream, 1)
    engine.mine.discard("p-a")  # acked through another replica
    await _events(stream, 1)
    assert engine.lags >= 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    engine = ScriptEngine(["x", "y"], acked={"p-x"})
    stream = _stream(engine, window=1, lease_ms=200, probe_interval_ms=60_000)
    task = asyncio.create_task(stream.run(_retriable))
    await _events(stream, 2)  # x's lease ran out, acked through another replica: y came
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert engine.released() == ["y"]  # x was settled: no longer the stream's to give back


@pytest.mark.parametrize("window", [1, 3])
async def test_a_batch_whose_lease_ran_out_unacked_ends_the_stream(window: int) -> None:
    """Its client stopped processing: going on would lease the batch to it again and again
    (each time one redelivery more, and a dead letter with max_redeliveries)."""
    engine = ScriptEngine(["x", "wait"])
    stream = _stream(engine, window=window, lease_ms=200, probe_interval_ms=60_000)
    task = asyncio.create_task(stream.run(_retriable))
    events = await _events(stream, 2)
    assert [e.kind for e in events] == ["batch", "end"]
    assert events[1].reason == "lease_expired"
    async with asyncio.timeout(10):
        await task
    assert engine.fetches <= 2  # "x", and at most one long poll, cut at x's lease
    assert engine.released() == []  # x ran out: the lease already gave it back


async def test_errors_retriable_go_on_final_end_and_bugs_are_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams, "_ERROR_PAUSE", 0.01)
    engine = ScriptEngine([StoreUnavailableError("down"), "a", InvalidRequestError("bad")])
    stream = _stream(engine, window=4)
    await asyncio.wait_for(stream.run(_retriable), 5)
    kinds = [(e.kind, e.reason) for e in await _events(stream, 4)]
    assert kinds == [("error", None), ("batch", None), ("error", None), ("end", "error")]
    assert engine.released() == ["a"]

    engine = ScriptEngine(["a", RuntimeError("a bug")])
    stream = _stream(engine, window=4)
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(stream.run(_retriable), 5)
    assert engine.released() == ["a"]  # released on the way out all the same


async def test_the_stream_ends_at_max_seconds_and_a_stale_release_is_no_error() -> None:
    engine = ScriptEngine(["stale-1", "throttled"])
    stream = _stream(engine, window=4, max_seconds=1.0, wait_ms=100)
    await asyncio.wait_for(stream.run(_retriable), 5)
    kinds = [(e.kind, e.reason) for e in await _events(stream, 2)]
    assert kinds == [("batch", None), ("end", "max_seconds")]
    assert engine.released() == ["stale-1"]


def _at_fetch(engine: ScriptEngine) -> None:
    engine.script = ["a", "block"]


def _at_put(engine: ScriptEngine) -> None:  # the writer reads nothing: the queue fills
    engine.script = ["a", *[StoreUnavailableError("down")] * 10]


def _at_error_pause(engine: ScriptEngine) -> None:
    engine.script = ["a", StoreUnavailableError("down"), "block"]


def _at_throttle_pause(engine: ScriptEngine) -> None:
    engine.script = ["a", "throttled", "block"]


def _at_window(engine: ScriptEngine) -> None:
    engine.script = ["a", "b"]


def _at_probe(engine: ScriptEngine) -> None:
    engine.script = ["a", "b"]
    engine.block_lag = True


@pytest.mark.parametrize(
    "where", [_at_fetch, _at_put, _at_error_pause, _at_throttle_pause, _at_window, _at_probe]
)
async def test_a_cancel_at_each_await_ends_the_stream_and_releases_its_leases(
    where: Callable[[ScriptEngine], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "_ERROR_PAUSE", 30.0 if where is _at_error_pause else 0.001)
    engine = ScriptEngine()
    where(engine)
    stream = _stream(engine, window=2, probe_interval_ms=50)
    hub = StreamHub(stream.settings)
    task = hub.open(stream, _retriable)
    assert hub.running == 1
    await asyncio.sleep(0.3)  # it reached the await under test
    assert not task.done()
    if where is _at_probe:
        assert engine.lags >= 1
    async with asyncio.timeout(10):
        await hub.close()
    assert task.done()
    assert hub.running == 0
    assert "a" in engine.released()


async def test_a_stream_whose_fetch_swallowed_the_cancel_still_ends_and_fetches_no_more() -> None:
    """The client left while a fetch ran in a library that dropped the cancel: the stream ends
    at once and releases its batch, instead of leasing batches for nobody until max_seconds."""
    engine = ScriptEngine(["a", "swallow", "b", "c"])
    stream = _stream(engine, window=2)
    hub = StreamHub(stream.settings)
    task = hub.open(stream, _retriable)
    await asyncio.sleep(0.2)  # it took "a" and waits in the swallowing fetch
    assert engine.fetches == 2
    hub.stop(task)
    async with asyncio.timeout(10):
        await asyncio.wait({task})
    assert task.cancelled()
    assert engine.fetches == 2
    assert engine.released() == ["a"]
    assert hub.running == 0


async def test_a_release_that_hangs_is_cut_at_release_timeout() -> None:
    engine = ScriptEngine(["a", "block"], block_settle=True)
    stream = _stream(engine, window=2, release_timeout=0.5)
    hub = StreamHub(stream.settings)
    task = hub.open(stream, _retriable)
    await _events(stream, 1)
    async with asyncio.timeout(10):
        await hub.close()
    assert task.done()
    assert engine.settles == [("a", "release")]


async def test_the_hub_caps_its_streams_and_refuses_after_close() -> None:
    settings = StreamConfig(max_streams=1)
    hub = StreamHub(settings)
    first = _stream(ScriptEngine())
    hub.open(first, _retriable)
    with pytest.raises(TooManyWaitersError):
        hub.open(_stream(ScriptEngine()), _retriable)
    await hub.close()
    with pytest.raises(TooManyWaitersError):
        hub.open(_stream(ScriptEngine()), _retriable)
    await hub.close()  # idempotent


# ---- the response that writes a stream -------------------------------------------------------


def _response(engine: ScriptEngine) -> tuple[EventStreamResponse, StreamHub]:
    config = GatewayConfig.from_mapping(
        {**BASE_CONFIG, "stream": {"heartbeat_seconds": 0.1, "release_timeout": 0.5}}
    )
    gateway: Gateway = create_app(config).state.gateway
    stream = _stream(engine, window=2)
    principal = gateway.auth.authenticate("Bearer k-admin-1")
    return EventStreamResponse(gateway, stream, principal, False), gateway.streams


async def _never() -> dict[str, Any]:
    await _forever()
    raise AssertionError("unreachable")


async def test_a_client_that_takes_nothing_ends_the_stream_after_four_heartbeats() -> None:
    engine = ScriptEngine(["a", "block"])
    response, hub = _response(engine)
    writes: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and b"event: batch" in message["body"]:
            await _forever()  # the client's socket is full
        writes.append(message.get("body", b""))

    async with asyncio.timeout(5):
        await response({"type": "http"}, _never, send)
    await hub.close()
    assert engine.released() == ["a"]
    assert hub.running == 0


@pytest.mark.parametrize("how", ["leave", "cancel"])
async def test_a_client_that_leaves_or_a_cancelled_request_releases_the_batches(how: str) -> None:
    engine = ScriptEngine(["a", "block"])
    response, hub = _response(engine)
    left = asyncio.Event()
    batch_sent = asyncio.Event()
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message.get("body", b""))
        if b"event: batch" in sent[-1]:
            batch_sent.set()

    call = asyncio.create_task(response({"type": "http"}, receive, send))
    async with asyncio.timeout(5):
        await batch_sent.wait()
    if how == "leave":
        left.set()
        async with asyncio.timeout(5):
            await call
    else:
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
    async with asyncio.timeout(5):
        await hub.close()
    assert engine.released() == ["a"], (how, engine.settles, sent)
    assert not any(b"event: end" in chunk for chunk in sent)
