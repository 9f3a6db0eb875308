"""What runs: variants (client x loop x mode), cells (scenario x size x W), topics, commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.harness.config import BenchConfig
from benchmarks.harness.proc import option_args
from benchmarks.peers.build import GO_LOG_DIR, go_command, java_command

#: Baselines of the ratios: the official clients, each run as a variant of the same name.
BASELINE = "java"
BASELINES = ("java", "go")


@dataclass(frozen=True)
class Variant:
    """One client configuration: ``aio-uvloop``, ``aio-asyncio-iter``, ``java`` ..."""

    name: str
    client: str
    loop: str | None
    mode: str


@dataclass(frozen=True)
class Cell:
    """One measured condition; every variant of the scenario runs in it once per round."""

    scenario: str
    size: int
    window: int | None
    rate: int | None = None

    @property
    def label(self) -> str:
        """Short human label, e.g. ``produce 1024 B W=16`` or ``latency 1024 B 1000/s``."""
        w = f" W={self.window}" if self.window is not None else ""
        r = f" {self.rate}/s" if self.rate is not None else ""
        return f"{self.scenario} {self.size} B{w}{r}"


def variants(cfg: BenchConfig, scenario: str, java_ok: bool, go_ok: bool = False) -> list[Variant]:
    """Variants of ``scenario``: ours per loop (and per consume API), then the peers built."""
    out: list[Variant] = []
    if "aio" in cfg.clients:
        for loop in cfg.loops:
            if scenario == "produce":
                out.append(Variant(f"aio-{loop}", "aio", loop, "closed"))
            elif scenario == "latency":
                out.append(Variant(f"aio-{loop}", "aio", loop, "open"))
            elif scenario == "e2e":
                out.append(Variant(f"aio-{loop}", "aio", loop, "e2e"))
            else:
                out.append(Variant(f"aio-{loop}-iter", "aio", loop, "iter"))
                out.append(Variant(f"aio-{loop}-batch", "aio", loop, "batch"))
    if "java" in cfg.clients and java_ok:
        mode = {"produce": "async", "consume": "pull", "latency": "open"}.get(scenario, scenario)
        out.append(Variant(BASELINE, "java", None, mode))
    # The Go client sends synchronously only (W goroutines) and has no open-loop mode either.
    if "go" in cfg.clients and go_ok and scenario in ("produce", "consume"):
        out.append(Variant("go", "go", None, "sync" if scenario == "produce" else "pull"))
    return out


def cells(cfg: BenchConfig) -> list[Cell]:
    """Cells in run order: produce (size x W), consume (size), latency and e2e (size x rate)."""
    out: list[Cell] = []
    if "produce" in cfg.scenarios:
        out += [Cell("produce", s, w) for s in cfg.sizes for w in cfg.windows]
    if "consume" in cfg.scenarios:
        out += [Cell("consume", s, None) for s in cfg.sizes]
    if "latency" in cfg.scenarios:
        out += [Cell("latency", s, None, r) for s in cfg.sizes for r in cfg.rates]
    if "e2e" in cfg.scenarios:
        out += [Cell("e2e", s, None, r) for s in cfg.sizes for r in cfg.e2e_rates]
    return out


@dataclass
class TopicPlan:
    """Topic of each (producing client, size) and the pre-filled consume topic of each size.

    Each client writes its own topic (same partitions and store settings); all consumers read
    the same pre-filled topic of a size (identical data and layout), each with a new group.
    """

    produce: dict[tuple[str, int], str] = field(default_factory=dict)
    consume: dict[int, str] = field(default_factory=dict)
    spark_source: str = ""
    spark_sink: str = ""

    @classmethod
    def fresh(cls, run_id: str, clients: Sequence[str], sizes: Sequence[int]) -> TopicPlan:
        """Names for a new cluster: ``b<run>_p_<client>_<size>`` and ``b<run>_c_<size>``."""
        plan = cls()
        for size in sizes:
            for client in clients:
                plan.produce[(client, size)] = f"b{run_id}_p_{client.replace('-', '_')}_{size}"
            plan.consume[size] = f"b{run_id}_c_{size}"
        plan.spark_source, plan.spark_sink = f"b{run_id}_s_src", f"b{run_id}_s_sink"
        return plan

    @classmethod
    def single(cls, topic: str, clients: Sequence[str], sizes: Sequence[int]) -> TopicPlan:
        """Every role on one existing topic (for smoke tests on a shared cluster)."""
        plan = cls()
        for size in sizes:
            for client in clients:
                plan.produce[(client, size)] = topic
            plan.consume[size] = topic
        plan.spark_source = plan.spark_sink = topic
        return plan

    def names(self) -> list[str]:
        """Distinct topic names."""
        spark = {t for t in (self.spark_source, self.spark_sink) if t}
        return sorted({*self.produce.values(), *self.consume.values(), *spark})


def aio_command(args: Sequence[str]) -> list[str]:
    """Command line of our client worker process."""
    return [sys.executable, "-m", "benchmarks.harness.aio_worker", *args]


def produce_command(
    v: Variant, master: str, topic: str, count: int, size: int, window: int, warmup: float
) -> list[str]:
    """Closed-loop produce command of variant ``v``."""
    common = option_args(
        ("--master", master),
        ("--topic", topic),
        ("--count", count),
        ("--size", size),
        ("--concurrency", window),
        ("--warmup-seconds", warmup),
    )
    if v.client == "java":
        return java_command(["produce", *common, "--mode", "async"])
    if v.client == "go":
        return go_command(["produce", *common, "--log-dir", str(GO_LOG_DIR)])
    return aio_command(["produce", *common, "--loop", v.loop or "asyncio"])


def latency_command(
    v: Variant, master: str, topic: str, size: int, rate: int, seconds: float, warmup: float
) -> list[str]:
    """Open-loop send latency command of variant ``v``: sends due at ``t0 + i / rate``, latency
    from each due time to its answer, after ``warmup`` s at the same rate."""
    common = option_args(
        ("--master", master),
        ("--topic", topic),
        ("--size", size),
        ("--rate", rate),
        ("--duration", seconds),
        ("--warmup-seconds", warmup),
    )
    if v.client == "java":
        return java_command(["latency", *common])
    return aio_command(
        ["latency", *common, "--count", "0", "--loop", v.loop or "asyncio", "--mode", "open"]
    )


def e2e_command(
    v: Variant,
    master: str,
    topic: str,
    group: str,
    size: int,
    rate: int,
    seconds: float,
    warmup: float,
) -> list[str]:
    """End-to-end latency command of variant ``v`` (producer and tailing consumer in one process,
    not-found wait 10 ms)."""
    if v.client == "java":
        java = option_args(
            ("--master", master),
            ("--topic", topic),
            ("--group", group),
            ("--size", size),
            ("--rate", rate),
            ("--duration", seconds),
            ("--warmup-seconds", warmup),
            ("--not-found-wait-ms", 10),
        )
        return java_command(["e2e", *java])
    ours = option_args(
        ("--master", master),
        ("--topic", topic),
        ("--group", group),
        ("--count", 0),
        ("--size", size),
        ("--rate", rate),
        ("--duration", seconds),
        ("--warmup-seconds", warmup),
        ("--loop", v.loop or "asyncio"),
        ("--mode", "e2e"),
        ("--not-found-wait", 0.01),
    )
    return aio_command(["e2e", *ours])


def consume_command(
    v: Variant, master: str, topic: str, group: str, count: int, idle: float
) -> list[str]:
    """Consume command of variant ``v`` (new group, earliest offset, 10 ms not-found wait)."""
    common = ["--master", master, "--topic", topic, "--group", group, "--count", str(count)]
    if v.client == "java":
        java = option_args(("--idle-timeout-seconds", int(idle)), ("--not-found-wait-ms", 10))
        return java_command(["consume", *common, *java])
    if v.client == "go":
        go = option_args(
            ("--idle-timeout-seconds", idle),
            ("--not-found-wait-ms", 10),
            ("--log-dir", GO_LOG_DIR),
        )
        return go_command(["consume", *common, *go])
    ours = option_args(
        ("--loop", v.loop or "asyncio"),
        ("--mode", v.mode),
        ("--idle-timeout", idle),
        ("--not-found-wait", 0.01),
    )
    return aio_command(["consume", *common, *ours])
