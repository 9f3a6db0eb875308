"""Run one benchmark client process and sample it (peak RSS) and the broker (CPU) meanwhile.

Every client -- our :mod:`~benchmarks.harness.aio_worker` or the Java peer -- prints one JSON
line when its measured phase ends. The sampler records ``(time, broker CPU seconds, client
RSS)`` every :data:`SAMPLE_INTERVAL` seconds; the broker CPU of the measured phase is read off
those samples over ``[t_line - seconds, t_line]``, where ``t_line`` is when the line arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

SAMPLE_INTERVAL = 0.2


def option_args(*options: tuple[str, object]) -> list[str]:
    """Command-line options from ``(flag, value)`` pairs, each value as text:
    ``option_args(("--size", 1024), ("--loop", "uvloop"))`` is
    ``["--size", "1024", "--loop", "uvloop"]`` (in the order given)."""
    return [text for flag, value in options for text in (flag, str(value))]


async def stop_process(proc: asyncio.subprocess.Process, grace: float) -> None:
    """Stop a server process the benchmark started: SIGTERM, then SIGKILL after ``grace``
    seconds (nothing when it has ended)."""
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()


@dataclass
class Sample:
    """One sampling instant."""

    t: float
    broker_cpu: float
    rss: int


@dataclass
class ClientRun:
    """What one client process reported plus what was sampled around it."""

    record: dict[str, Any] | None
    returncode: int | None
    wall_seconds: float
    peak_rss_bytes: int
    broker_cpu_seconds: float | None
    error: str | None = None
    samples: list[Sample] = field(default_factory=list)


def process_cpu(pids: Sequence[int]) -> float:
    """Sum of user+system CPU seconds of ``pids`` (dead ones count 0)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def _rss(proc: Any) -> int:
    if proc is None:
        return 0
    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


def interpolate(samples: Sequence[Sample], t: float) -> float:
    """Broker CPU seconds at time ``t``, linear between the neighbouring samples."""
    if not samples:
        return 0.0
    if t <= samples[0].t:
        return samples[0].broker_cpu
    for a, b in itertools.pairwise(samples):
        if a.t <= t <= b.t:
            if b.t == a.t:
                return b.broker_cpu
            return a.broker_cpu + (b.broker_cpu - a.broker_cpu) * (t - a.t) / (b.t - a.t)
    return samples[-1].broker_cpu


async def _sample(pid: int, broker_pids: Sequence[int], out: list[Sample]) -> None:
    try:
        proc: Any = psutil.Process(pid)
    except psutil.Error:
        proc = None
    while True:
        out.append(Sample(time.monotonic(), process_cpu(broker_pids), _rss(proc)))
        await asyncio.sleep(SAMPLE_INTERVAL)


async def run_client(
    argv: Sequence[str],
    *,
    broker_pids: Sequence[int],
    timeout: float,
    stderr_path: Path,
    cwd: Path | None = None,
) -> ClientRun:
    """Run ``argv``; return its JSON line, peak RSS and the broker CPU of its measured phase.

    Args:
        argv: Command line (already prefixed with ``taskset`` when pinning).
        broker_pids: Broker JVM pids whose CPU is attributed to the measured phase.
        timeout: Seconds before the process is killed.
        stderr_path: File receiving the client's stderr (diagnostics).
        cwd: Working directory.
    """
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    samples: list[Sample] = []
    t_start = time.monotonic()
    with stderr_path.open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=err, cwd=cwd
        )
        sampler = asyncio.ensure_future(_sample(proc.pid, broker_pids, samples))
        record: dict[str, Any] | None = None
        t_line: float | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(timeout):
                assert proc.stdout is not None
                async for raw in proc.stdout:
                    line = raw.decode(errors="replace").strip()
                    if line.startswith("{") and record is None:
                        t_line = time.monotonic()
                        with contextlib.suppress(ValueError):
                            record = json.loads(line)
                await proc.wait()
        except TimeoutError:
            error = f"timed out after {timeout:.0f}s"
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
    wall = time.monotonic() - t_start
    samples.append(Sample(time.monotonic(), process_cpu(broker_pids), 0))
    broker_cpu: float | None = None
    if record is not None and t_line is not None:
        seconds = float(record.get("seconds") or 0.0)
        broker_cpu = interpolate(samples, t_line) - interpolate(samples, t_line - seconds)
    if record is None and error is None:
        # The directory name only (result files must not carry machine paths).
        where = f"{stderr_path.parent.name}/{stderr_path.name}"
        error = f"no JSON line (exit {proc.returncode}); see {where}"
    return ClientRun(
        record=record,
        returncode=proc.returncode,
        wall_seconds=wall,
        peak_rss_bytes=max((s.rss for s in samples), default=0),
        broker_cpu_seconds=broker_cpu,
        error=error,
        samples=samples,
    )
