"""The replica's cost of one consume fetch, counted rather than timed.

Run ``python -m benchmarks.micro.gateway_fetch [--tool cprofile|callgrind] [--fetches N]
[--top K]``. A :class:`~tubemq_aio.testing.FakeCluster` (in this process, broker batches of
``--batch`` 100-byte messages, about a real broker's) and a redis-server serve one gateway
replica, a process of its own started as ``tubemq-gateway serve`` starts one (uvicorn, one
worker, the same app factory). One client here fetches at the default ``max_messages``, each
fetch carrying the ack of the one before, as the benchmark's consumers do. After ``--warmup``
fetches the count starts in the replica alone: with ``cprofile`` the replica's profiler is
switched on and off by signals and the Python function calls (cProfile's, builtins included)
are divided by the fetches; with ``callgrind`` the replica runs under Valgrind's Callgrind and
its instruction count (``Ir``) between a zeroing and a dump is divided likewise. Both are
counts of work, so a loaded machine changes them little (scheduling moves the calls by a few
per cent: how often a socket read finds part of an answer). Output: one JSON line (fetches,
messages and broker batches per fetch, the count per fetch and, with ``--top``, the functions
called most, per fetch). Nothing here asserts a figure.

``python -m benchmarks.micro.gateway_fetch serve CONFIG PORT OUT`` is the replica side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.gateway.lean_http import LeanClient
from benchmarks.harness.proc import stop_process
from tubemq_aio import Producer
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.testing import FakeCluster, RedisServer
from tubemq_aio.testing._ports import allocate_ports

KEY = "bench-key-123"
TOPIC, GROUP = "gwf", "gwf_group"
HOST = "127.0.0.1"


def _config(path: Path, masters: str, redis_url: str) -> Path:
    path.write_text(
        f'masters = "{masters}"\nredis = "{redis_url}"\nsecret = "bench-secret-0123456789"\n'
        f'[[groups]]\nname = "{GROUP}"\ntopics = ["{TOPIC}"]\nlease_ms = 30000\n'
        f'[[keys]]\nkey = "{KEY}"\nscopes = ["consume:*", "admin:*"]\n'
    )
    return path


def serve(config: str, port: int, out: str) -> None:
    """The replica: ``tubemq-gateway serve``'s server, with a profiler switched on by SIGUSR1
    and off (its statistics written to ``out``) by SIGUSR2."""
    profiler = cProfile.Profile()

    def stop(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    signal.signal(signal.SIGUSR2, stop)
    run_replica(config, port, "tubemq_aio.gateway.__main__:app_from_env")


def run_replica(config: str, port: int, factory: str) -> None:
    """Serve the app the uvicorn factory ``factory`` (``module:function``) builds from the
    configuration file ``config`` on ``port``, as ``tubemq-gateway serve`` does (one worker),
    until the process is stopped."""
    import uvicorn

    from tubemq_aio.gateway.config.sources import CONFIG_ENV
    from tubemq_aio.gateway.server import GatewayServer

    os.environ[CONFIG_ENV] = config
    settings = uvicorn.Config(
        factory, factory=True, host=HOST, port=port, log_level="warning", access_log=False
    )
    GatewayServer(settings).run()


@contextlib.asynccontextmanager
async def _replica(config: Path, port: int, out: Path, tool: str) -> AsyncIterator[int]:
    wrap: list[str] = []
    if tool == "callgrind":
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            raise SystemExit("callgrind needs valgrind on PATH (Debian package valgrind)")
        wrap = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}"]
    async with replica_process("benchmarks.micro.gateway_fetch", config, port, out, wrap) as pid:
        yield pid


@contextlib.asynccontextmanager
async def replica_process(
    module: str, config: Path, port: int, out: Path, wrap: Sequence[str] = ()
) -> AsyncIterator[int]:
    """``python -m module serve CONFIG PORT OUT`` (run under ``wrap``, a command prefix), once
    its ``/healthz`` answers; its pid. Stopped (SIGTERM, then SIGKILL) on exit."""
    argv = [*wrap, sys.executable, "-m", module, "serve", str(config), str(port), str(out)]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        async with LeanClient(f"http://{HOST}:{port}", {}) as probe:
            while True:
                with contextlib.suppress(OSError, TimeoutError, ConnectionError):
                    if (await probe.get("/healthz")).status_code == 200:
                        break
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the replica did not start ({proc.returncode})")
                await probe.close()
                await asyncio.sleep(0.5)
        yield proc.pid
    finally:
        await stop_process(proc, 60)


class _Consumer:
    """One client fetching at the default ``max_messages``, each fetch carrying the ack of the
    one before."""

    def __init__(self, client: LeanClient) -> None:
        self.client = client
        self.pending: list[str] = []

    async def fetches(self, n: int) -> tuple[int, int]:
        """``n`` fetches that got a batch: (those, their messages)."""
        got = messages = 0
        while got < n:
            body: dict[str, object] = {"wait_ms": 0}
            if self.pending:
                body["ack"] = self.pending
            r = await self.client.post(f"/v1/groups/{GROUP}/fetch", json=body)
            if r.status_code != 200:
                raise RuntimeError(f"fetch answered {r.status_code}: {r.content[:300]!r}")
            reply = orjson.loads(r.content)
            self.pending = []
            if reply["status"] == "ok":
                got += 1
                messages += len(reply["messages"])
                self.pending = [reply["lease"]["token"]]
        return got, messages


async def _stats(client: LeanClient) -> dict[str, float]:
    """The engine's counters from ``/metrics``."""
    text = (await client.get("/metrics")).content.decode()
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^tubemq_gateway_engine_(\w+) ([\d.e+]+)$", text, re.M)
    }


def _newest_dump(out: Path) -> Path:
    """The newest Callgrind dump of ``out``'s run (``out.N`` files)."""
    return max(out.parent.glob(out.name + ".*"), key=lambda p: p.stat().st_mtime)


def _callgrind_total(out: Path) -> int:
    """The ``Ir`` total of the newest dump of ``out``'s run."""
    dump = _newest_dump(out)
    found = re.search(r"^(?:summary|totals): (\d+)", dump.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no total in {dump}")
    return int(found.group(1))


def _top(out: Path, fetches: int, k: int) -> list[dict[str, Any]]:
    stats = pstats.Stats(str(out))
    rows = []
    for (file, line, name), (_cc, nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = file if file == "~" else f"{Path(file).parent.name}/{Path(file).name}:{line}"
        rows.append({"calls": round(nc / fetches, 1), "tottime_share": tt, "fn": f"{where} {name}"})
    total_tt = sum(r["tottime_share"] for r in rows) or 1.0
    for row in rows:
        row["tottime_share"] = round(row["tottime_share"] / total_tt, 3)
    rows.sort(key=lambda r: -r["calls"])
    return rows[:k]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Bring up the fake cluster, Redis and the replica; count ``args.fetches`` fetches."""
    total = (args.warmup + args.fetches + 10) * args.batch * 3
    with tempfile.TemporaryDirectory(prefix="tubemq-gw-fetch-") as tmp:
        async with (
            FakeCluster(topics={TOPIC: 3}, max_batch=args.batch, max_batch_bytes=8 << 20) as fake,
            RedisServer() as redis,
        ):
            async with Producer(fake.master_addr, topics=[TOPIC]) as producer:
                for _ in range(0, total, 5000):
                    await producer.send_many(TOPIC, [b"x" * 100] * 5000)
            config = _config(Path(tmp) / "gw.toml", fake.master_addr, redis.url)
            await initialise_store(GatewayConfig.load(str(config), {}))
            out = Path(tmp) / ("replica.prof" if args.tool == "cprofile" else "callgrind.out")
            port = allocate_ports(1)[0]
            async with _replica(config, port, out, args.tool) as pid:
                headers = {"Authorization": f"Bearer {KEY}"}
                async with LeanClient(f"http://{HOST}:{port}", headers, timeout=600) as client:
                    consumer = _Consumer(client)
                    await consumer.fetches(args.warmup)
                    before = await _stats(client)
                    await _switch(args.tool, pid, on=True)
                    fetches, messages = await consumer.fetches(args.fetches)
                    await _switch(args.tool, pid, on=False)
                    after = await _stats(client)
                    await asyncio.sleep(0.5)  # the profile is written
                    if args.tool == "cprofile":
                        stats = pstats.Stats(str(out))
                        count = stats.total_calls  # type: ignore[attr-defined]
                        top = _top(out, fetches, args.top) if args.top else []
                    else:
                        count, top = _callgrind_total(out), []
                    if args.save is not None:
                        newest = out if args.tool == "cprofile" else _newest_dump(out)
                        shutil.copyfile(newest, args.save)
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    unit = "python_calls" if args.tool == "cprofile" else "instructions"
    return {
        "tool": args.tool,
        "fetches": fetches,
        "messages_per_fetch": round(messages / fetches, 1),
        "broker_rpcs_per_fetch": round(delta.get("broker_rpcs", 0.0) / fetches, 2),
        "broker_batches_per_fetch": round(delta.get("broker_batches", 0.0) / fetches, 2),
        "redis_roundtrips_per_fetch": round(delta.get("redis_roundtrips", 0.0) / fetches, 2),
        f"{unit}_per_fetch": round(count / fetches),
        "top": top,
    }


async def _switch(tool: str, pid: int, *, on: bool) -> None:
    if tool == "cprofile":
        os.kill(pid, signal.SIGUSR1 if on else signal.SIGUSR2)
        await asyncio.sleep(0.2)
        return
    flag = "--zero" if on else "--dump"
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", flag, str(pid), stdout=asyncio.subprocess.DEVNULL
    )
    await proc.wait()


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module)."""
    if argv[:1] == ["serve"]:
        serve(argv[1], int(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.micro.gateway_fetch")
    parser.add_argument("--tool", choices=("cprofile", "callgrind"), default="cprofile")
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=660, help="messages per broker batch")
    parser.add_argument("--top", type=int, default=0, help="list the K most called functions")
    parser.add_argument("--save", type=Path, help="keep the profile (or Callgrind dump) here")
    args = parser.parse_args(argv)
    if args.fetches < 1 or args.batch < 1 or args.warmup < 0 or args.top < 0:
        parser.error("--fetches and --batch must be 1 or more, --warmup and --top 0 or more")
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
