"""Client CPU per message of ``Producer.send`` / ``send_many`` against a stand-in broker.

A child process runs a :class:`~tubemq_aio.testing.FakeCluster` master (one topic of four
partitions) that announces a stand-in broker: a few lines of asyncio that answer every frame with
a prepared ``SendMessageResponseB2P``, so the broker's own work is tiny and never in the client's
figure. The client process runs ``window`` tasks that each loop on ``await producer.send(...)``
(mode ``send``) or ``await producer.send_many(...)`` with ``batch`` bodies (mode ``many``) until
``count`` messages are done, after a warm-up of a tenth as many; it reports its own user + system
CPU seconds per 10⁶ messages, and per 1 000 messages its read and write system calls
(``/proc/self/io``, which counts uvloop's ``read``/``write`` but not asyncio's ``recv``/``send``,
so these two are 0 without ``--uvloop``) and its voluntary context switches (each one a wait for
the network).
Output: one JSON line per run.

``--master ADDR --topic NAME`` sends to a real cluster instead (for example one started by
``make cluster-up``). The stand-in answers every request of one read in one write; against a
real broker the counts show how many answers one read carries (about 9 at W = 256 on two cores,
see "Produce against the real broker" in ``docs/benchmarks.md``).

``--read-size BYTES`` caps what one socket read of the client takes (the connection's read buffer,
default 256 KB). The stand-in answers every request of one read in one write, so by default one
client read finds a whole window's answers and the work of a loop turn (poll, read, write) is
spread over hundreds of sends; a real broker writes each answer on its own and one read finds
about 3 (asyncio) or 2 (uvloop) on an idle machine. With a cap of a few answers (44 bytes each,
e.g. ``--read-size 132``) the run settles where each read and each write carries about one
send (counted under Callgrind on asyncio: 1.01 reads and 1.01 writes per send), the real
broker's worst case: the difference of the two instruction counts is the work of one
read-and-write turn.

Run: ``python -m benchmarks.micro.produce [--uvloop] [--mode send|many] [--count N]
[--window W] [--batch B] [--size S] [--rounds R] [--read-size BYTES]
[--read-coalescing SHARE]
[--master ADDR --topic NAME]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import tubemq_aio._io.connection
from tubemq_aio import Producer
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.rpc import Method, encode_success

TOPIC = "bench"
_ANSWER = encode_success(
    Method.BROKER_PRODUCER_SEND_MESSAGE,
    broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="1", messageId=12345, appendTime=1, appendOffset=7
    ).SerializeToString(),
)


class _StandInBroker(asyncio.Protocol):
    """Answers every request frame with the same successful send answer."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        frames = self.decoder.feed(data)
        if frames:
            self.transport.write(b"".join(encode_frame(f[0], _ANSWER) for f in frames))


async def _serve() -> None:
    """The child: print the master address, serve until stdin closes."""
    from tubemq_aio.testing import FakeCluster

    loop = asyncio.get_running_loop()
    server = await loop.create_server(_StandInBroker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with FakeCluster(topics={TOPIC: 4}) as cluster:
        cluster.advertise_broker(1, f"127.0.0.1:{port}")
        print(cluster.master_addr, flush=True)
        await loop.run_in_executor(None, sys.stdin.read)
    server.close()


def _cpu() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


def _io_counts() -> tuple[int, int, int]:
    """Read and write system calls so far (0 where ``/proc`` is missing), voluntary switches."""
    calls = {"syscr": 0, "syscw": 0}
    io = Path("/proc/self/io")
    if io.exists():
        for line in io.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in calls:
                calls[key] = int(value)
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    return calls["syscr"], calls["syscw"], switches


async def _phase(producer: Producer, ns: argparse.Namespace, count: int, body: bytes) -> int:
    issued = 0
    done = 0

    async def one_by_one() -> None:
        nonlocal issued, done
        send = producer.send
        while issued < count:
            issued += 1
            await send(ns.topic, body)
            done += 1

    async def batched() -> None:
        nonlocal issued, done
        bodies = [body] * ns.batch
        while issued < count:
            issued += ns.batch
            for outcome in await producer.send_many(ns.topic, bodies):
                if isinstance(outcome, BaseException):
                    raise outcome
            done += ns.batch

    worker = one_by_one if ns.mode == "send" else batched
    await asyncio.gather(*(worker() for _ in range(ns.window)))
    return done


async def _client(ns: argparse.Namespace, master: str) -> dict[str, object]:
    body = bytes(97 + i % 26 for i in range(ns.size))
    if ns.read_size is not None:
        tubemq_aio._io.connection.READ_SIZE = ns.read_size
    config = {
        "topics": [ns.topic],
        "telemetry": False,
        "max_in_flight_sends": max(4096, ns.window),
        "read_coalescing": ns.read_coalescing,
    }
    async with Producer(master, **config) as p:
        await _phase(p, ns, max(ns.count // 10, ns.window), body)
        (user0, sys0), io0, t0 = _cpu(), _io_counts(), time.perf_counter()
        done = await _phase(p, ns, ns.count, body)
        (user1, sys1), io1, wall = _cpu(), _io_counts(), time.perf_counter() - t0
    cpu = user1 - user0 + sys1 - sys0
    reads, writes, waits = (round((b - a) / done * 1000, 1) for a, b in zip(io0, io1, strict=True))
    return {
        "broker": "stand-in" if ns.master is None else "real",
        "mode": ns.mode,
        "uvloop": ns.uvloop,
        "window": ns.window,
        "batch": ns.batch if ns.mode == "many" else 1,
        "read_size": tubemq_aio._io.connection.READ_SIZE,
        "read_coalescing": ns.read_coalescing,
        "messages": done,
        "cpu_s_per_1e6": round(cpu / done * 1e6, 2),
        "sys_share": round((sys1 - sys0) / cpu, 2),
        "msg_per_s": round(done / wall),
        "read_calls_per_1e3": reads,
        "write_calls_per_1e3": writes,
        "waits_per_1e3": waits,
    }


def main() -> int:
    """Start the stand-in cluster, run the rounds, print one JSON line per round."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--mode", choices=("send", "many"), default="send")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--read-size", type=int, help="bytes one socket read takes at most")
    parser.add_argument(
        "--read-coalescing", type=float, default=1 / 32, help="the producer's read_coalescing"
    )
    parser.add_argument("--master", help="a real cluster's master address (no stand-in)")
    parser.add_argument("--topic", default=TOPIC, help="topic to send to (with --master)")
    ns = parser.parse_args()
    if ns.serve:
        asyncio.run(_serve())
        return 0
    run = asyncio.run
    if ns.uvloop:
        import uvloop

        run = uvloop.run
    if ns.master is not None:
        for _ in range(ns.rounds):
            print(json.dumps(run(_client(ns, ns.master))), flush=True)
        return 0
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.micro.produce", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        master = child.stdout.readline().strip()
        for _ in range(ns.rounds):
            print(json.dumps(run(_client(ns, master))), flush=True)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
