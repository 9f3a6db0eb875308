"""Pipelined loopback echo through the transport: calls per second and µs per call.

The echo server runs in a **separate process** (always on uvloop when installed, so it is not the
bottleneck); only the client process's loop is chosen by ``--uvloop``. The client runs ``window``
tasks that each loop on one call until ``calls`` calls are done, after a warm-up of a tenth as
many. Output: one JSON line per run.

Modes:
    rpc   -- the production path: :meth:`~tubemq_aio._io.rpc_client.RpcClient.call`, the façade
             the producer, the consumers and the master sessions call (pool lookup, RPC envelope
             encode per call, frame, coalesced write, ``data_received``, envelope decode, future
             resolve). The harness's floor uses this mode.
    conn  -- the same minus the façade: a pre-encoded envelope straight to ``Connection.call``
             (shows what the façade itself costs).

Run: ``python -m benchmarks.micro.transport [--uvloop] [--calls N] [--window W] [--size B]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import (
    SERVICE_OF_METHOD,
    Method,
    decode_request,
    encode_request,
    encode_success,
)

METHOD = Method.BROKER_PRODUCER_SEND_MESSAGE
T = TypeVar("T")
MODES = ("rpc", "conn")


class _EchoProtocol(asyncio.Protocol):
    """Server side: answers each request with its own body; envelopes are cached by payload."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.cache: dict[bytes, bytes] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        out = []
        cache = self.cache
        for serial, payload in self.decoder.feed(data):
            answer = cache.get(payload)
            if answer is None:
                request = decode_request(payload)
                answer = encode_success(request.method, request.body)
                if len(cache) < 1024:
                    cache[payload] = answer
            out.append(encode_frame(serial, answer))
        assert self.transport is not None
        self.transport.writelines(out)


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_EchoProtocol, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


def _runner(use_uvloop: bool) -> Callable[[Coroutine[Any, Any, T]], T]:
    """``asyncio.run``, or ``uvloop.run`` when asked (exits when uvloop is missing)."""
    if not use_uvloop:
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        raise SystemExit("uvloop is not installed") from None
    return uvloop.run


async def _run(mode: str, port: int, calls: int, window: int, size: int) -> dict[str, Any]:
    settings = TransportSettings(max_in_flight=max(1024, window))
    pool = ConnectionPool(settings)
    address = Address("127.0.0.1", port)
    rpc = RpcClient(pool)
    conn = await rpc.connect(address)
    body = b"x" * size
    payload = encode_request(SERVICE_OF_METHOD[METHOD], METHOD, 10_000, body)

    async def worker(count: int) -> None:
        if mode == "rpc":
            rpc_call = rpc.call
            for _ in range(count):
                await rpc_call(address, METHOD, body, 10.0)
        else:
            call = conn.call
            for _ in range(count):
                await call(payload, 10.0)

    async def burst(total: int) -> None:
        share, rest = divmod(total, window)
        await asyncio.gather(*(worker(share + (i < rest)) for i in range(window)))

    await burst(max(window, calls // 10))  # warm-up
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await burst(calls)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    stats = rpc.stats.snapshot()
    await pool.close()
    return {
        "bench": "transport",
        "mode": mode,
        "calls": calls,
        "window": window,
        "body_bytes": size,
        "seconds": round(elapsed, 4),
        "calls_per_s": round(calls / elapsed),
        "us_per_call": round(elapsed / calls * 1e6, 3),
        "client_cpu_s": round(cpu, 4),
        "calls_per_cpu_s": round(calls / cpu) if cpu else None,
        "us_cpu_per_call": round(cpu / calls * 1e6, 3),
        "dropped": stats["dropped_responses"],
        "timeouts": stats["timeouts"],
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, start the echo server process, run and print one JSON line per mode."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--uvloop", action="store_true", help="run the client on uvloop")
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--window", type=int, default=256, help="concurrent callers")
    parser.add_argument("--size", type=int, default=100, help="request/response body bytes")
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode")
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        try:
            _runner(True)(_serve())
        except SystemExit:
            asyncio.run(_serve())
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.micro.transport", "--serve"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        run = _runner(args.uvloop)
        loop_name = "uvloop" if args.uvloop else "asyncio"
        modes = list(MODES) if args.mode == "all" else [args.mode]
        for mode in [m for _ in range(args.repeat) for m in modes]:
            result = run(_run(mode, port, args.calls, args.window, args.size))
            result.update(
                loop=loop_name,
                server="separate process (uvloop)",
                python=platform.python_version(),
                cpus=os.cpu_count(),
                max_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            )
            print(json.dumps(result), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=5)


if __name__ == "__main__":
    main()
