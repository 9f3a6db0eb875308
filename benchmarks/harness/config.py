"""Options of a benchmark run (``python -m benchmarks ...``) and their ``--quick`` defaults."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.env import REPO

ALL_SCENARIOS = ("produce", "consume", "latency", "e2e", "spark")
ALL_CLIENTS = ("aio", "java", "go")
ALL_LOOPS = ("asyncio", "uvloop")


@dataclass
class BenchConfig:
    """One benchmark run.

    Attributes:
        quick: the ~10 minute profile (1 KB, W 16/256, 4 rounds, 20 000 messages, 5 s warm-up,
            produce + consume + open-loop latency at 1 000 and 10 000 msg/s for 3 s + e2e at
            1 000 msg/s for 3 s).
        sizes: message sizes in bytes.
        windows: produce in-flight windows W (workers awaiting ``send`` / Java async cap).
        rounds: rounds per cell including the first, which is discarded.
        messages: measured messages per produce/consume run; ``None`` sizes each run to a few
            seconds to a minute of the slowest client (see :meth:`count_for`).
        warmup_seconds: produce warm-up per run of our client and the Go peer (excluded from
            every figure).
        java_warmup_seconds: produce warm-up per run of the Java peer (its JIT needs longer).
        loops: event loops for our client.
        clients: ``aio``, ``java``, ``go`` (a peer that cannot be built is reported as blocked).
        scenarios: ``produce``, ``consume``, ``latency``, ``e2e``, ``spark`` (our Spark source
            and sink next to PySpark's floor and our producer, 1 KB only; see
            :mod:`~benchmarks.harness.spark_worker`).
        out: parent directory of the result directory.
        partitions: partitions per topic (one broker, one store).
        pin: pin servers and client with ``taskset`` when possible.
        floor: run the client-side micro benchmarks (codec, transport) for "floor vs real".
        rates: offered rates (msg/s) of the open-loop ``latency`` scenario (ours and the Java
            peer's asynchronous send).
        latency_seconds: measured seconds per latency run.
        latency_warmup_seconds: latency warm-up at the same rate (not recorded).
        e2e_rates: offered rates (msg/s) of the ``e2e`` scenario (producer timestamp -> consumer,
            not-found wait 10 ms; ours and the Java peer).
        e2e_seconds: measured seconds per e2e run (after ``e2e_warmup_seconds`` at the rate).
        e2e_warmup_seconds: e2e warm-up at the same rate (not recorded).
        run_timeout: seconds before one client run is killed.
        discard_first: drop round 0 from the statistics (warm broker caches, JIT, page cache).
        spark_rows: messages of the Spark source topic, rows of each Spark read and write.
        estimate_only: print the expected duration (:mod:`~benchmarks.harness.estimate`) and
            stop without running anything.
    """

    quick: bool = False
    sizes: list[int] = field(default_factory=lambda: [100, 1024, 10240])
    windows: list[int] = field(default_factory=lambda: [1, 16, 256])
    rounds: int = 4
    messages: int | None = None
    warmup_seconds: float = 5.0
    java_warmup_seconds: float = 30.0
    loops: list[str] = field(default_factory=lambda: list(ALL_LOOPS))
    clients: list[str] = field(default_factory=lambda: list(ALL_CLIENTS))
    scenarios: list[str] = field(default_factory=lambda: list(ALL_SCENARIOS))
    out: Path = REPO / "benchmarks" / "results"
    partitions: int = 4
    pin: bool = True
    floor: bool = True
    rates: list[int] = field(default_factory=lambda: [1000, 10000])
    latency_seconds: float = 10.0
    latency_warmup_seconds: float = 5.0
    e2e_rates: list[int] = field(default_factory=lambda: [1000, 10000])
    e2e_seconds: float = 10.0
    e2e_warmup_seconds: float = 5.0
    run_timeout: float = 600.0
    discard_first: bool = True
    spark_rows: int = 1_000_000
    estimate_only: bool = False

    def count_for(self, size: int, scenario: str = "consume", window: int | None = None) -> int:
        """Measured messages per ``scenario`` run at ``size`` bytes and produce window ``window``.

        CPU is counted over the measured phase only, so a run needs to be long enough for a
        stable figure, not 10**6 messages: the defaults keep the slowest client (the Go producer
        at a few thousand msg/s) near 5-20 s per run.
        """
        if self.messages is not None:
            return self.messages
        big = size >= 10240
        if scenario == "produce":
            if (window or 1) == 1:
                return 10_000 if big else 20_000
            return 50_000 if big else 100_000
        return 50_000 if big else 300_000

    def warmup_for(self, client: str) -> float:
        """Produce warm-up seconds of ``client`` (``java``: :attr:`java_warmup_seconds`)."""
        return self.java_warmup_seconds if client == "java" else self.warmup_seconds

    def as_dict(self) -> dict[str, object]:
        """JSON-able copy."""
        return {
            "quick": self.quick,
            "sizes": self.sizes,
            "windows": self.windows,
            "rounds": self.rounds,
            "messages": {
                str(s): {
                    **{f"produce W={w}": self.count_for(s, "produce", w) for w in self.windows},
                    "consume": self.count_for(s),
                }
                for s in self.sizes
            },
            "warmup_seconds": self.warmup_seconds,
            "java_warmup_seconds": self.java_warmup_seconds,
            "loops": self.loops,
            "clients": self.clients,
            "scenarios": self.scenarios,
            "partitions": self.partitions,
            "pin": self.pin,
            "floor": self.floor,
            "rates": self.rates,
            "latency_seconds": self.latency_seconds,
            "latency_warmup_seconds": self.latency_warmup_seconds,
            "e2e_rates": self.e2e_rates,
            "e2e_seconds": self.e2e_seconds,
            "e2e_warmup_seconds": self.e2e_warmup_seconds,
            "discard_first": self.discard_first,
            "spark_rows": self.spark_rows,
        }


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _names(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        bad = [n for n in names if n not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {list(allowed)}")
        return names

    return parse


def parse_args(argv: Sequence[str] | None = None) -> BenchConfig:
    """Build a :class:`BenchConfig` from the command line (``--quick`` sets the quick profile;
    explicit options override it)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="tubemq-aio vs the official Java and Go clients on one local TubeMQ broker "
        "(interleaved rounds, ratios with bootstrap 95 % intervals).",
    )
    parser.add_argument("--quick", action="store_true", help="~10 min: 1 KB, W 16/256, 4 rounds")
    parser.add_argument("--sizes", type=_ints, help="message sizes, e.g. 100,1024,10240")
    parser.add_argument("--windows", type=_ints, help="produce windows W, e.g. 1,16,256")
    parser.add_argument("--rounds", type=int, help="rounds per cell (the first is discarded)")
    parser.add_argument("--messages", type=int, help="measured messages per run")
    parser.add_argument(
        "--warmup-seconds", type=float, help="produce warm-up per run (ours, Go; default 5)"
    )
    parser.add_argument(
        "--java-warmup-seconds", type=float, help="produce warm-up per Java run (default 30)"
    )
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "both"], help="our event loop")
    parser.add_argument("--clients", type=_names(ALL_CLIENTS), help="aio,java,go")
    parser.add_argument(
        "--scenarios", type=_names(ALL_SCENARIOS), help="produce,consume,latency,e2e,spark"
    )
    parser.add_argument("--spark-rows", type=int, help="spark: rows per read/write (10**6)")
    parser.add_argument("--rates", type=_ints, help="latency: offered msg/s, e.g. 1000,10000")
    parser.add_argument("--latency-seconds", type=float, help="latency: seconds per run")
    parser.add_argument(
        "--latency-warmup-seconds", type=float, help="latency: warm-up per run (default 5)"
    )
    parser.add_argument("--e2e-rates", type=_ints, help="e2e: offered msg/s, e.g. 1000,10000")
    parser.add_argument("--e2e-seconds", type=float, help="e2e: measured seconds per run")
    parser.add_argument("--partitions", type=int, help="partitions per topic (default 4)")
    parser.add_argument("--out", type=Path, help="parent of the result directory")
    parser.add_argument("--no-pin", action="store_true", help="do not use taskset")
    parser.add_argument(
        "--estimate", action="store_true", help="print the expected duration and exit"
    )
    floor = parser.add_mutually_exclusive_group()
    floor.add_argument(
        "--floor",
        dest="floor",
        action="store_true",
        default=None,
        help="run the codec/transport micro benchmarks (default: not with --quick)",
    )
    floor.add_argument("--no-floor", dest="floor", action="store_false")
    ns = parser.parse_args(argv)
    cfg = BenchConfig()
    if ns.quick:
        cfg = BenchConfig(
            quick=True,
            sizes=[1024],
            windows=[16, 256],
            rounds=4,
            messages=20_000,
            warmup_seconds=5.0,
            java_warmup_seconds=5.0,
            clients=["aio", "java", "go"],
            scenarios=["produce", "consume", "latency", "e2e"],
            floor=False,
            rates=[1000, 10000],
            latency_seconds=3.0,
            latency_warmup_seconds=1.0,
            e2e_rates=[1000],
            e2e_seconds=3.0,
            e2e_warmup_seconds=1.0,
        )
    names = (
        "sizes",
        "windows",
        "rounds",
        "messages",
        "warmup_seconds",
        "java_warmup_seconds",
        "clients",
        "scenarios",
        "partitions",
        "out",
        "floor",
        "rates",
        "latency_seconds",
        "latency_warmup_seconds",
        "e2e_rates",
        "e2e_seconds",
        "spark_rows",
    )
    for name in names:
        value = getattr(ns, name)
        if value is not None:
            setattr(cfg, name, value)
    if ns.loop is not None:
        cfg.loops = list(ALL_LOOPS) if ns.loop == "both" else [ns.loop]
    cfg.pin = not ns.no_pin
    cfg.estimate_only = ns.estimate
    if cfg.rounds < 2:
        parser.error("--rounds must be at least 2 (the first round is discarded)")
    return cfg
