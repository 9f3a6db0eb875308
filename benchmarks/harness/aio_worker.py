"""tubemq-aio as a benchmark client in its own process (so its CPU time is its own).

``python -m benchmarks.harness.aio_worker produce|consume --master H:P --topic T ...`` prints
**one JSON line** on stdout, shaped like the Java peer's (``client``, ``op``, ``mode``,
``concurrency``, ``size``, ``messages``, ``bytes``, ``seconds``, ``cpu_seconds``, ``errors``,
``warmup_messages``, ``ready_seconds``, ``first_error``) plus ``loop`` and ``max_rss_kb``.

* produce (closed loop): ``--concurrency W`` tasks each awaiting ``Producer.send`` (W in
  flight), first for ``--warmup-seconds`` (excluded), then until ``--count`` sends finished.
* latency (open loop): sends scheduled at ``--rate`` msg/s for ``--duration`` s; latency from
  each *intended* send time to its ack (see :mod:`~benchmarks.harness.latency`).
* e2e (open loop): producer at ``--rate`` and a new-group consumer (not-found wait
  ``--not-found-wait``) in this process; latency from each intended send time (in the body) to
  the consumer's receipt (see :mod:`~benchmarks.harness.e2e`).
* consume: a new group from the earliest offset; ``--mode iter`` uses ``async for`` (one
  message per step), ``--mode batch`` uses ``getmany`` + ``ack``. The clock starts once
  partitions are assigned and stops at the last message counted.

``cpu_seconds`` is ``getrusage(RUSAGE_SELF)`` user+sys over the measured phase only, as the
Java peer measures its own JVM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness.e2e import run_e2e, wait_assigned
from benchmarks.harness.latency import open_loop
from tubemq_aio import Producer
from tubemq_aio.consumer import Consumer
from tubemq_aio.telemetry import Telemetry


@dataclass
class PhaseCount:
    """Counters of one phase (warm-up or measured)."""

    ok: int = 0
    errors: int = 0
    nbytes: int = 0
    first_error: str | None = None
    last_at: float = field(default_factory=time.perf_counter)

    def fail(self, what: str) -> None:
        """Count one failure, remembering the first."""
        self.errors += 1
        if self.first_error is None:
            self.first_error = what


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _emit(ns: argparse.Namespace, mode: str, **fields: Any) -> None:
    record: dict[str, Any] = {
        "client": "aio",
        "op": ns.op,
        "mode": mode,
        "loop": ns.loop,
        "otel": ns.otel,
        "concurrency": ns.concurrency,
        "size": ns.size,
    }
    record.update(fields)
    if ns.op == "consume":
        record["concurrency"] = 1  # one consuming task, as the Java peer's single pull thread
    record["max_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(record), flush=True)


async def _produce_phase(
    producer: Producer, topic: str, body: bytes, workers: int, total: int, go: Callable[[], bool]
) -> PhaseCount:
    phase = PhaseCount()
    issued = 0

    async def worker() -> None:
        nonlocal issued
        send = producer.send
        while issued < total and go():
            issued += 1
            try:
                await send(topic, body)
            except Exception as exc:
                phase.fail(f"{type(exc).__name__}: {exc}")
            else:
                phase.ok += 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    phase.nbytes = phase.ok * len(body)
    return phase


def bench_producer(ns: argparse.Namespace) -> Producer:
    """The producer every sending scenario uses: the run's master, topic, heartbeat, retries
    and telemetry setting."""
    return Producer(
        ns.master,
        topics=[ns.topic],
        heartbeat_interval=ns.heartbeat,
        send_retries=ns.retries,
        telemetry=bench_telemetry(ns.otel),
    )


def bench_telemetry(mode: str) -> bool | Telemetry:
    """``off``: no instrumentation; ``sdk``: the OpenTelemetry SDK recording every span and
    metric, spans batched to an exporter that drops them (the cost of tracing, not of a
    collector)."""
    if mode == "off":
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


def not_found_max_wait(ns: argparse.Namespace) -> float:
    """The consumer's ``msg_not_found_max_wait``: ``--not-found-max-wait``, else the fixed
    period of ``--not-found-wait`` (what the peers do, so the comparison stays like for like)."""
    chosen = ns.not_found_wait if ns.not_found_max_wait is None else ns.not_found_max_wait
    return float(chosen)


def payload(size: int) -> bytes:
    """A ``size``-byte printable body (the same bytes in every run)."""
    return bytes(97 + i % 26 for i in range(size))


async def produce(ns: argparse.Namespace) -> int:
    """Run the closed-loop produce benchmark and print its JSON line."""
    body = payload(ns.size)
    t_ready = time.perf_counter()
    async with bench_producer(ns) as producer:
        ready = time.perf_counter() - t_ready
        warm = 0
        if ns.warmup_seconds > 0:
            end = time.perf_counter() + ns.warmup_seconds
            w = await _produce_phase(
                producer, ns.topic, body, ns.concurrency, 1 << 62, lambda: time.perf_counter() < end
            )
            warm = w.ok
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        p = await _produce_phase(producer, ns.topic, body, ns.concurrency, ns.count, lambda: True)
        t1, cpu1 = time.perf_counter(), cpu_seconds()
        metrics = producer.metrics()
    _emit(
        ns,
        "closed",
        messages=p.ok,
        bytes=p.nbytes,
        seconds=round(t1 - t0, 6),
        cpu_seconds=round(cpu1 - cpu0, 6),
        errors=p.errors,
        warmup_messages=warm,
        ready_seconds=round(ready, 3),
        first_error=p.first_error,
        retried=metrics.get("retried", 0),
    )
    return 0 if p.errors == 0 else 1


async def latency(ns: argparse.Namespace) -> int:
    """Open loop at ``--rate`` msg/s for ``--duration`` s (after ``--warmup-seconds`` at the same
    rate); print the latency percentiles from intended send time to ack."""
    body = payload(ns.size)
    t_ready = time.perf_counter()
    async with bench_producer(ns) as producer:
        ready = time.perf_counter() - t_ready
        warm = 0
        if ns.warmup_seconds > 0:
            warm = (await open_loop(producer, ns.topic, body, ns.rate, ns.warmup_seconds)).sent
        cpu0 = cpu_seconds()
        res = await open_loop(producer, ns.topic, body, ns.rate, ns.duration)
        cpu1 = cpu_seconds()
    ok = res.sent - res.errors
    _emit(
        ns,
        "open",
        rate=ns.rate,
        messages=ok,
        bytes=ok * ns.size,
        seconds=round(res.seconds, 6),
        cpu_seconds=round(cpu1 - cpu0, 6),
        errors=res.errors,
        warmup_messages=warm,
        ready_seconds=round(ready, 3),
        first_error=res.first_error,
        latency=res.histogram.summary(),
        schedule_lag=res.lag.summary(),
        latency_cdf=res.histogram.cdf(),
    )
    return 0 if res.errors == 0 else 1


async def e2e(ns: argparse.Namespace) -> int:
    """End-to-end latency at ``--rate`` msg/s for ``--duration`` s after ``--warmup-seconds``;
    print the percentiles from intended send time to the consumer's receipt."""
    t_ready = time.perf_counter()
    async with (
        Consumer(
            ns.master,
            group=ns.group,
            topics=[ns.topic],
            consume_from="latest",
            heartbeat_interval=ns.heartbeat,
            msg_not_found_wait=ns.not_found_wait,
            msg_not_found_max_wait=not_found_max_wait(ns),
            telemetry=bench_telemetry(ns.otel),
        ) as consumer,
        bench_producer(ns) as producer,
    ):
        await wait_assigned(consumer, ns.ready_timeout)
        ready = time.perf_counter() - t_ready
        cpu0 = cpu_seconds()
        res = await run_e2e(
            producer,
            consumer,
            ns.topic,
            size=max(ns.size, 8),
            rate=ns.rate,
            seconds=ns.duration,
            warmup_seconds=ns.warmup_seconds,
        )
        cpu1 = cpu_seconds()
    missing = res.sent - res.send_errors - res.received
    first_error = res.first_error
    if missing > 0 and first_error is None:
        first_error = f"{missing} sent message(s) never reached the consumer"
    _emit(
        ns,
        "e2e",
        rate=ns.rate,
        messages=res.received,
        bytes=res.received * ns.size,
        seconds=round(res.seconds, 6),
        cpu_seconds=round(cpu1 - cpu0, 6),
        errors=res.send_errors + max(0, missing),
        missing=max(0, missing),
        duplicates=res.duplicates,
        warmup_messages=res.warmup_sent,
        ready_seconds=round(ready, 3),
        first_error=first_error,
        not_found_wait_ms=round(ns.not_found_wait * 1000, 3),
        latency=res.histogram.summary(),
        latency_cdf=res.histogram.cdf(),
    )
    return 0 if res.send_errors == 0 and missing <= 0 else 1


async def _consume_iter(consumer: Consumer, count: int, phase: PhaseCount) -> None:
    async for msg in consumer:
        phase.ok += 1
        phase.nbytes += len(msg.body)
        phase.last_at = time.perf_counter()
        if phase.ok >= count:
            return


async def _consume_batch(
    consumer: Consumer, count: int, max_records: int, phase: PhaseCount
) -> None:
    while phase.ok < count:
        batch = await consumer.getmany(max_records=max_records, timeout=1.0)
        if not batch:
            continue
        phase.ok += len(batch)
        phase.nbytes += sum(len(m.body) for m in batch)
        phase.last_at = time.perf_counter()
        await batch.ack()


async def _watchdog(phase: PhaseCount, idle: float, task: asyncio.Task[None]) -> None:
    seen, since = phase.ok, time.perf_counter()
    while not task.done():
        await asyncio.sleep(min(idle, 0.5))
        now = time.perf_counter()
        if phase.ok != seen:
            seen, since = phase.ok, now
        elif now - since > idle:
            task.cancel()
            return


async def consume(ns: argparse.Namespace) -> int:
    """Run the consume benchmark (pre-filled topic, new group, earliest) and print its line."""
    t_ready = time.perf_counter()
    async with Consumer(
        ns.master,
        group=ns.group,
        topics=[ns.topic],
        consume_from="earliest",
        heartbeat_interval=ns.heartbeat,
        msg_not_found_wait=ns.not_found_wait,
        msg_not_found_max_wait=not_found_max_wait(ns),
        telemetry=bench_telemetry(ns.otel),
    ) as consumer:
        deadline = t_ready + ns.ready_timeout
        while not consumer.assignment() and time.perf_counter() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)  # no assignment event in the API: poll
        ready = time.perf_counter() - t_ready
        phase = PhaseCount()
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        phase.last_at = t0
        body: Coroutine[Any, Any, None]
        if ns.mode == "iter":
            body = _consume_iter(consumer, ns.count, phase)
        else:
            body = _consume_batch(consumer, ns.count, ns.max_records, phase)
        task = asyncio.ensure_future(body)
        dog = asyncio.ensure_future(_watchdog(phase, ns.idle_timeout, task))
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
        finally:
            dog.cancel()
        cpu1 = cpu_seconds()
        if phase.ok < ns.count:
            phase.fail(f"only {phase.ok} of {ns.count} messages before the idle timeout")
        seconds = phase.last_at - t0
    _emit(
        ns,
        ns.mode,
        messages=phase.ok,
        bytes=phase.nbytes,
        size=phase.nbytes // phase.ok if phase.ok else 0,
        seconds=round(seconds, 6),
        cpu_seconds=round(cpu1 - cpu0, 6),
        errors=phase.errors,
        warmup_messages=0,
        ready_seconds=round(ready, 3),
        first_error=phase.first_error,
    )
    return 0 if phase.errors == 0 else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the worker's command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.harness.aio_worker")
    parser.add_argument("op", choices=["produce", "consume", "latency", "e2e"])
    parser.add_argument("--master", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--warmup-seconds", type=float, default=0.0)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument(
        "--mode", choices=["closed", "iter", "batch", "open", "e2e"], default="closed"
    )
    parser.add_argument("--group", default="bench")
    parser.add_argument("--heartbeat", type=float, default=2.0, help="seconds (Java peer: 2)")
    parser.add_argument("--retries", type=int, default=2, help="producer send_retries")
    parser.add_argument("--not-found-wait", type=float, default=0.01)
    parser.add_argument(
        "--not-found-max-wait",
        type=float,
        default=None,
        help="ceiling of the doubling rest of empty partitions (default: --not-found-wait, the "
        "fixed period the Java and Go peers use)",
    )
    parser.add_argument("--max-records", type=int, default=1000)
    parser.add_argument("--idle-timeout", type=float, default=30.0)
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="latency: msg/s offered")
    parser.add_argument("--duration", type=float, default=30.0, help="latency: seconds")
    parser.add_argument(
        "--otel", choices=["off", "sdk"], default="off", help="producer telemetry (default off)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark phase on the chosen event loop."""
    ns = parse_args(argv)
    coro = {"produce": produce, "consume": consume, "latency": latency, "e2e": e2e}[ns.op](ns)
    if ns.loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


if __name__ == "__main__":
    sys.exit(main())
