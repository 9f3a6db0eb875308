"""Where a consume fetch's wall time goes: a per-stage timeline of ``make bench-gateway``'s run.

Run ``python -m benchmarks.micro.gateway_timeline [--count N] [--consumers 4] [--sdk]
[--kept-batch-bytes B] [--fake]``. A real :class:`~tubemq_aio.testing.LocalCluster` (1 broker,
a topic of 3 partitions; ``--fake``: a FakeCluster, for a quick look at the gateway's own part)
and a redis-server with AOF ``appendfsync always`` serve one gateway replica, started as
``tubemq-gateway serve`` starts one (uvicorn, one worker) but with timing wrappers installed in
its process only (nothing of this runs in a replica started otherwise). ``--consumers`` clients
fetch at the default ``max_messages``, each fetch carrying the ack of the one before, as the
benchmark's consumers do, until ``--count`` messages were read.

The replica records, per fetch and on ``time.monotonic()`` (one clock for every process on
the machine), when the ASGI app got the request and its body, when the engine's fetch began
and ended, each Redis script (the acquire with its carried acks, the booking), each broker
call (GetMessage, CommitOffset), the JSON answer's build and its write. The clients record when
they began to write each request, when its answer was read and when it was parsed. The two
sides are joined per connection, in order. Output: one JSON line with, per stage, its mean and
median in milliseconds over the fetches that got a batch, the mean cycle of a partition (from
one fetch of it to the next), how long a partition stood unleased between cycles, what the
fetches that got no batch (the consumer beyond the partitions) waited, and with ``--sdk`` the
SDK's client-balanced consumer's rate on the same topic for the ratio. Nothing here asserts a
figure; on a shared machine the figures are only indicative.

``python -m benchmarks.micro.gateway_timeline serve CONFIG PORT OUT`` is the replica side:
SIGUSR1 writes what it recorded to ``OUT`` (JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import importlib
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.gateway.lean_http import LeanClient
from benchmarks.micro.gateway_fetch import HOST, KEY, replica_process, run_replica
from tubemq_aio import Producer
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.testing import FakeCluster, LocalCluster, RedisServer
from tubemq_aio.testing._ports import allocate_ports

TOPIC, GROUP = "gwt", "gwt_group"
PARTITIONS = 3
BODY = b"x" * 100

#: The stages of the fetch being served (None outside a traced fetch).
_STAGES: contextvars.ContextVar[list[list[Any]] | None] = contextvars.ContextVar(
    "gateway_timeline_stages", default=None
)
_RECORDS: list[dict[str, Any]] = []
#: How late (seconds) the replica's event loop woke a task asleep for :data:`_PROBE_S`.
_LAGS: list[float] = []
_PROBE_S = 0.001
_probe: list[asyncio.Task[None]] = []  # the lag probe, started by the first traced fetch


async def _lag_probe() -> None:
    """Sample the replica's event loop lag (how late a 1 ms sleep ends) until cancelled."""
    while True:
        began = time.monotonic()
        await asyncio.sleep(_PROBE_S)
        _LAGS.append(time.monotonic() - began - _PROBE_S)


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Asgi = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]


def _config(path: Path, masters: str, redis_url: str, kept_batch_bytes: int) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "bench-secret-0123456789"\n'
        f"kept_batch_bytes = {kept_batch_bytes}\n"
        f'[[groups]]\nname = "{GROUP}"\ntopics = ["{TOPIC}"]\nlease_ms = 30000\n'
        f'[[keys]]\nkey = "{KEY}"\nscopes = ["consume:*", "admin:*"]\n'
    )
    return path


# ---- the replica side ---------------------------------------------------------------------


def _timed(owner: Any, name: str, stage: str, label: Callable[..., str] | None = None) -> None:
    """Wrap the coroutine method (or function) ``owner.name`` to record ``stage`` around it."""
    original = getattr(owner, name)

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        stages = _STAGES.get()
        if stages is None:
            return await original(*args, **kwargs)
        began = time.monotonic()
        try:
            return await original(*args, **kwargs)
        finally:
            row = [stage, began, time.monotonic()]
            if label is not None:
                row.append(label(*args, **kwargs))
            stages.append(row)

    setattr(owner, name, wrapper)


def _timed_sync(owner: Any, name: str, stage: str) -> None:
    """Wrap the plain function ``owner.name`` to record ``stage`` around it."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stages = _STAGES.get()
        began = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            if stages is not None:
                stages.append([stage, began, time.monotonic()])

    setattr(owner, name, wrapper)


def _untraced(owner: Any, name: str) -> None:
    """Run the coroutine method ``owner.name`` outside any fetch's record: a task a fetch
    spawns (its read-ahead) inherits the fetch's context, and its calls come after the answer,
    off the fetch's path."""
    original = getattr(owner, name)

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        _STAGES.set(None)  # the task's own copy of the context
        return await original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _install() -> None:
    """The timing wrappers (this process only)."""
    from tubemq_aio.consumer._broker import BrokerRpc
    from tubemq_aio.gateway.engine import fetch_attempt
    from tubemq_aio.gateway.engine.read_ahead_driver import ReadAheads
    from tubemq_aio.gateway.engine.service import ConsumeService
    from tubemq_aio.gateway.http.routes import consume
    from tubemq_aio.gateway.leases.lease_store import LeaseStore

    def partition(_self: object, key: Any, *_a: object, **_k: object) -> str:
        return str(key.partition_key)

    def pack(_self: object, _partition: object, **kw: object) -> str:
        return "consumed" if kw.get("last_pack_consumed") or kw.get("consumed") else "plain"

    _timed(ConsumeService, "fetch", "engine")
    _timed(fetch_attempt, "acquire_with_acks", "acquire")
    _timed(LeaseStore, "acquire", "acquire")
    _timed(LeaseStore, "record", "booking", partition)
    _timed(LeaseStore, "record_and_mark", "booking", partition)  # with read-ahead on
    _untraced(ReadAheads, "_read")
    _untraced(ReadAheads, "_abandon")
    _timed(BrokerRpc, "get_message", "get_message", pack)
    _timed(BrokerRpc, "get_message_data", "get_message_wire")
    _timed(BrokerRpc, "commit", "commit", pack)
    _timed_sync(consume, "messages_fragment", "json_messages")
    _timed_sync(consume, "json_response", "json_dumps")


def _traced(app: Asgi) -> Asgi:
    """``app`` with every ``POST …/fetch`` recorded (see the module)."""

    async def traced(
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/fetch"):
            await app(scope, receive, send)
            return
        if not _probe:
            _probe.append(asyncio.get_running_loop().create_task(_lag_probe()))
        rec: dict[str, Any] = {"in": time.monotonic(), "port": scope["client"][1]}
        stages: list[list[Any]] = []

        async def rcv() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body"):
                rec.setdefault("body", time.monotonic())
            return message

        async def snd(message: Message) -> None:
            if message["type"] == "http.response.start":
                rec["head"], rec["status"] = time.monotonic(), message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                rec["sent"], rec["bytes"] = time.monotonic(), len(message.get("body", b""))

        token = _STAGES.set(stages)
        try:
            await app(scope, rcv, snd)
        finally:
            _STAGES.reset(token)
            rec["stages"] = stages
            _RECORDS.append(rec)

    return traced


def traced_app() -> Asgi:
    """The replica's app as ``tubemq-gateway serve`` builds it, traced (uvicorn factory)."""
    from tubemq_aio.gateway.__main__ import app_from_env

    _install()
    return _traced(app_from_env())


def serve(config: str, port: int, out: str) -> None:
    """The replica: ``tubemq-gateway serve``'s server with the fetch timeline recorded; SIGUSR1
    writes it to ``out``."""
    # uvicorn imports this module by name (this process runs it as __main__): its records
    traced = importlib.import_module(__spec__.name if __spec__ else __name__)

    def dump(*_: object) -> None:
        lags = sorted(traced._LAGS) or [0.0]
        lag = {"mean": statistics.fmean(lags), "p90": lags[len(lags) * 9 // 10], "max": lags[-1]}
        Path(out).write_text(json.dumps({"records": traced._RECORDS, "loop_lag_s": lag}))

    signal.signal(signal.SIGUSR1, dump)
    run_replica(config, port, "benchmarks.micro.gateway_timeline:traced_app")


# ---- the client side ----------------------------------------------------------------------


async def _consumer(
    client: LeanClient, done: asyncio.Event, count: int, got: list[int]
) -> tuple[int, list[dict[str, Any]]]:
    """Fetch → (ack on the next fetch) until ``got[0]`` reaches ``count``; (local port, rows)."""
    rows: list[dict[str, Any]] = []
    pending: list[str] = []
    port = -1
    while not done.is_set():
        body: dict[str, object] = {"wait_ms": 500}
        if pending:
            body["ack"] = pending
        began = time.monotonic()
        r = await client.post(f"/v1/groups/{GROUP}/fetch", json=body)
        answered = time.monotonic()
        if r.status_code != 200:
            raise RuntimeError(f"fetch answered {r.status_code}: {r.content[:300]!r}")
        reply = orjson.loads(r.content)
        parsed = time.monotonic()
        if port < 0:
            port = client.local_port()
        pending = []
        n = 0
        if reply["status"] == "ok":
            n = len(reply["messages"])
            got[0] += n
            pending = [reply["lease"]["token"]]
            if got[0] >= count:
                done.set()
        rows.append(
            {
                "send": began,
                "answered": answered,
                "parsed": parsed,
                "n": n,
                "status": reply["status"],
            }
        )
    if pending:
        await client.post(f"/v1/leases/{pending[0]}/ack")
    return port, rows


def _spans(rec: dict[str, Any], stage: str) -> list[tuple[float, float, Any]]:
    return [(s[1], s[2], s[3] if len(s) > 3 else None) for s in rec["stages"] if s[0] == stage]


Row = dict[str, Any]


def _covered(spans: list[tuple[float, float, Any]]) -> float:
    """The time covered by at least one of ``spans`` (seconds)."""
    total, end = 0.0, float("-inf")
    for a, b, _ in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _breakdown(pairs: list[tuple[Row, Row, Row | None]]) -> dict[str, Any]:
    """Per stage (ms), over the fetches that got a batch: mean and median.

    ``pairs`` are (client row, server record, the same client's next row or None)."""
    cols: dict[str, list[float]] = {}

    def put(name: str, value: float) -> None:
        cols.setdefault(name, []).append(value * 1000)

    for row, rec, following in pairs:
        if row["status"] != "ok" or "sent" not in rec:
            continue
        engine = _spans(rec, "engine")
        e0, e1 = (engine[0][0], engine[0][1]) if engine else (float(rec["body"]), rec["head"])
        put("1_client_write_to_asgi", rec["in"] - row["send"])
        body = float(rec["body"] if "body" in rec else rec["in"])
        put("2_asgi_body", body - rec["in"])
        put("3_route_auth_parse", e0 - body)
        for name in ("acquire", "booking"):
            spans = _spans(rec, name)
            put(f"redis_{name}", sum(b - a for a, b, _ in spans))
        gets = _spans(rec, "get_message")
        put("broker_get_message", sum(b - a for a, b, _ in gets))
        put("broker_get_message_calls", len(gets) / 1000)
        put("broker_get_message_wire", sum(b - a for a, b, _ in _spans(rec, "get_message_wire")))
        commits = _spans(rec, "commit")
        put("broker_commit", sum(b - a for a, b, _ in commits))
        put("broker_commit_calls", len(commits) / 1000)
        broker = _spans(rec, "get_message") + _spans(rec, "commit")
        put("broker_wait", _covered(broker))  # the calls overlap when the commit rides along
        inside = _covered(broker + _spans(rec, "acquire") + _spans(rec, "booking"))
        put("engine_total", e1 - e0)
        put("engine_other", (e1 - e0) - inside)
        put("json_messages", sum(b - a for a, b, _ in _spans(rec, "json_messages")))
        put("json_dumps", sum(b - a for a, b, _ in _spans(rec, "json_dumps")))
        put("4_engine_end_to_head", rec["head"] - e1)
        put("5_write", rec["sent"] - rec["head"])
        put("6_server_sent_to_client_read", row["answered"] - rec["sent"])
        put("7_client_parse", row["parsed"] - row["answered"])
        if following is not None:
            put("8_client_idle_to_next_send", following["send"] - row["parsed"])
        put("cycle_send_to_parsed", row["parsed"] - row["send"])
        put("answer_kbytes", rec.get("bytes", 0) / 1e6)
        put("messages", row["n"] / 1000)
    return {
        k: {"mean": round(statistics.fmean(v), 3), "median": round(statistics.median(v), 3)}
        for k, v in sorted(cols.items())
    }


def _median_ms(seconds: list[float]) -> float | None:
    """Median of ``seconds`` in ms, rounded to µs; None when empty."""
    return round(statistics.median(seconds) * 1000, 3) if seconds else None


def _partitions(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per partition: mean cycle (booking to booking) and mean time it stood unleased (from
    the booking's end to the next acquire's start that took it, approximated by the next
    fetch of it: its ack rides there)."""
    bookings: dict[str, list[tuple[float, float, float]]] = {}
    for rec in recs:
        for a, b, p in _spans(rec, "booking"):
            acq = _spans(rec, "acquire")
            bookings.setdefault(p, []).append((acq[0][0] if acq else a, b, rec.get("sent", b)))
    out: dict[str, Any] = {}
    for p, rows in sorted(bookings.items()):
        rows.sort()
        cycles = [n[0] - r[0] for r, n in itertools.pairwise(rows)]
        unleased = [n[0] - r[2] for r, n in itertools.pairwise(rows)]
        out[p] = {
            "fetches": len(rows),
            "cycle_ms_median": _median_ms(cycles),
            "answer_sent_to_next_acquire_ms_median": _median_ms(unleased),
        }
    return out


async def _sdk_rate(masters: str, count: int) -> float:
    from benchmarks.gateway.measure import sdk_consume

    return await sdk_consume(masters, TOPIC, "gwt_sdk", count)


@contextlib.asynccontextmanager
async def _cluster(fake: bool) -> AsyncIterator[str]:
    if fake:
        async with FakeCluster(topics={TOPIC: PARTITIONS}) as cluster:
            yield cluster.master_addr
    else:
        async with LocalCluster(brokers=1, topics=[TOPIC], topic_partitions=PARTITIONS) as cluster:
            yield cluster.master_addr


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Bring up the cluster, Redis and the traced replica; read ``args.count`` messages."""
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-timeline-") as tmp:
        async with _cluster(args.fake) as masters, RedisServer() as redis:
            async with Producer(masters, topics=[TOPIC]) as producer:
                for _ in range(0, args.count + 5000, 5000):
                    await producer.send_many(TOPIC, [BODY] * 5000)
            config = _config(Path(tmp) / "gw.toml", masters, redis.url, args.kept_batch_bytes)
            await initialise_store(GatewayConfig.load(str(config), {}))
            out, port = Path(tmp) / "timeline.json", allocate_ports(1)[0]
            module = "benchmarks.micro.gateway_timeline"
            async with replica_process(module, config, port, out) as pid:
                headers = {"Authorization": f"Bearer {KEY}"}
                done, got = asyncio.Event(), [0]
                clients = [
                    LeanClient(f"http://{HOST}:{port}", headers, timeout=120)
                    for _ in range(args.consumers)
                ]
                began = time.monotonic()
                try:
                    results = await asyncio.gather(
                        *(_consumer(c, done, args.count, got) for c in clients)
                    )
                finally:
                    for c in clients:
                        await c.close()
                rate = got[0] / (time.monotonic() - began)
                os.kill(pid, signal.SIGUSR1)
                await asyncio.sleep(2)  # the replica writes what it recorded
                recorded = json.loads(out.read_text())
                recs: list[dict[str, Any]] = recorded["records"]
            sdk = await _sdk_rate(masters, args.count) if args.sdk else None
    by_port: dict[int, list[dict[str, Any]]] = {}
    for rec in recs:
        by_port.setdefault(rec["port"], []).append(rec)
    pairs: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]] = []
    waits: list[float] = []
    for port_, rows in results:
        served = sorted(by_port.get(port_, []), key=lambda r: r["in"])
        for i, (row, rec) in enumerate(zip(rows, served, strict=False)):
            pairs.append((row, rec, rows[i + 1] if i + 1 < len(rows) else None))
            if row["status"] != "ok":
                waits.append((row["answered"] - row["send"]) * 1000)
    return {
        "cluster": "fake" if args.fake else "local",
        "consumers": args.consumers,
        "kept_batch_bytes": args.kept_batch_bytes,
        "messages": got[0],
        "msgs_s": round(rate),
        "sdk_msgs_s": None if sdk is None else round(sdk),
        "ratio": None if sdk is None else round(rate / sdk, 3),
        "fetches_ok": sum(1 for r, _, _ in pairs if r["status"] == "ok"),
        "fetches_not_ok": len(waits),
        "not_ok_wait_ms_mean": round(statistics.fmean(waits), 2) if waits else None,
        "stages_ms": _breakdown(pairs),
        "replica_loop_lag_ms": {k: round(v * 1000, 3) for k, v in recorded["loop_lag_s"].items()},
        "partitions": _partitions(recs),
    }


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module)."""
    if argv[:1] == ["serve"]:
        serve(argv[1], int(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.micro.gateway_timeline")
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--kept-batch-bytes", type=int, default=0)
    parser.add_argument("--sdk", action="store_true", help="also the SDK consumer's rate")
    parser.add_argument("--fake", action="store_true", help="a FakeCluster, not a LocalCluster")
    args = parser.parse_args(argv)
    if args.count < 1 or args.consumers < 1 or args.kept_batch_bytes < 0:
        parser.error("--count and --consumers must be 1 or more, --kept-batch-bytes 0 or more")
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
