"""Pipelined loopback echo through the transport: calls per second and µs per call.

The echo server runs in a **separate process** (always on uvloop when installed, so it is not the
bottleneck); only the client process's loop is chosen by ``--uvloop``. The client runs ``window``
tasks that each loop on ``await conn.call(...)`` until ``calls`` calls are done, after a warm-up
of a tenth as many. Output: one JSON line per run.

Modes (the ``*-`` variants exist only to measure where decoding is cheaper):
    conn        -- pre-encoded request envelope; measures call → frame → coalesced write →
                   data_received → envelope decode → future resolve (production path).
    conn-raw    -- same, but ``data_received`` hands the raw payload to the caller, which decodes
                   the envelope after waking up.
    rpc         -- the :class:`~tubemq_aio._io.rpc_client.RpcClient` façade with a protobuf
                   request (SerializeToString + envelope encode per call, ``FromString`` in the
                   caller; production path).
    rpc-parse-in-caller   -- encode + ``conn.call`` + ``FromString`` in the caller (no façade).
    rpc-parse-in-protocol -- same work, but ``FromString`` runs inside ``data_received``.

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

from tubemq_aio._io.connection import Connection
from tubemq_aio._io.pool import Address, ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.sweeper import DeadlineSweeper
from tubemq_aio.protocol._pb import RPC_pb2
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.rpc import (
    SERVICE_OF_METHOD,
    Method,
    decode_request,
    decode_response,
    encode_request,
    encode_success,
)

METHOD = Method.BROKER_PRODUCER_SEND_MESSAGE
T = TypeVar("T")
MODES = ("conn", "conn-raw", "rpc", "rpc-parse-in-caller", "rpc-parse-in-protocol")


class _RawConnection(Connection):
    """Measurement variant: the production loop, but the caller decodes the envelope."""

    def data_received(self, data: bytes) -> None:
        pending = self._pending
        stats = self.stats
        for serial, payload in self._decoder.feed(data):
            entry = pending.pop(serial, None)
            if entry is None:
                stats.dropped_responses += 1
                continue
            if self._room_waiters:
                self._wake_room()
            fut = entry[0]
            if entry[3]:
                self._async.release()
            stats.responses += 1
            if fut.done():
                stats.dropped_responses += 1
            else:
                fut.set_result(payload)


class _ParsingConnection(Connection):
    """Measurement variant: the production loop plus ``FromString`` inside ``data_received``."""

    def data_received(self, data: bytes) -> None:
        pending = self._pending
        stats = self.stats
        parse = RPC_pb2.RspExceptionBody.FromString
        for serial, payload in self._decoder.feed(data):
            entry = pending.pop(serial, None)
            if entry is None:
                stats.dropped_responses += 1
                continue
            if self._room_waiters:
                self._wake_room()
            fut: asyncio.Future[Any] = entry[0]
            if entry[3]:
                self._async.release()
            stats.responses += 1
            body = decode_response(payload)
            if fut.done():
                stats.dropped_responses += 1
            elif isinstance(body, bytes):
                fut.set_result(parse(body))
            else:
                fut.set_exception(body)


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
    await pool.connection(address)
    conn = pool.ready(address)
    assert conn is not None
    sweeper = DeadlineSweeper(settings.sweep_interval)
    if mode in ("conn-raw", "rpc-parse-in-protocol"):
        variant = _RawConnection if mode == "conn-raw" else _ParsingConnection
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: variant("bench", settings), address.host, address.port
        )
        sweeper.add(conn)
    body = b"x" * size
    payload = encode_request(SERVICE_OF_METHOD[METHOD], METHOD, 10_000, body)
    message = RPC_pb2.RspExceptionBody(exceptionName="x" * size, stackTrace="")

    async def worker(count: int) -> None:
        call = conn.call
        if mode == "conn":
            for _ in range(count):
                await call(payload, 10.0)
        elif mode == "conn-raw":
            for _ in range(count):
                decode_response(await call(payload, 10.0))
        elif mode == "rpc":
            rpc_call = rpc.call
            response_type = RPC_pb2.RspExceptionBody
            for _ in range(count):
                await rpc_call(address, METHOD, message, response_type, 10.0)
        elif mode == "rpc-parse-in-caller":
            service = SERVICE_OF_METHOD[METHOD]
            parse = RPC_pb2.RspExceptionBody.FromString
            for _ in range(count):
                request = encode_request(service, METHOD, 10_000, message.SerializeToString())
                parse(await call(request, 10.0))
        else:
            service = SERVICE_OF_METHOD[METHOD]
            for _ in range(count):
                request = encode_request(service, METHOD, 10_000, message.SerializeToString())
                await call(request, 10.0)

    async def burst(total: int) -> None:
        share, rest = divmod(total, window)
        await asyncio.gather(*(worker(share + (i < rest)) for i in range(window)))

    await burst(max(window, calls // 10))  # warm-up
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await burst(calls)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    stats = conn.stats.snapshot()
    await conn.close()
    await sweeper.close()
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
