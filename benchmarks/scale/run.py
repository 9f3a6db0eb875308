"""``make bench-scale``: how a client's cost grows with partitions, members and topics.

Every cell starts a stand-in cluster (:mod:`benchmarks.scale.cluster`, its own process) and runs
each measured client in a fresh process (:mod:`benchmarks.scale.client`), so no cell inherits
another's memory, caches or connections. The cells:

* ``consume``: a server-balanced consumer over P partitions (client CPU per 10⁶ messages,
  ``positions()`` time, memory per partition, tasks, sockets);
* ``idle``: an idle consumer of ``IDLE_PARTITIONS`` partitions with the default idle back-off and
  with the official clients' fixed 0.4 s period (share of a core, fetches a second);
* ``connect``: a client-balanced consumer connecting P partitions one by one (client CPU);
* ``produce``: a producer sending round robin over T topics (client CPU per 10⁶ messages);
* ``group``: N members of one group on 256 partitions (time to split, time to take over the
  partitions of a member that left, master requests a second once settled).

The stand-in cluster's own CPU is recorded per cell (``cluster_cpu_share``): near 1.0 it would
be the bottleneck. Results: ``raw.json``, ``summary.md`` and PNG plots under
``benchmarks/results/<date>-<revision>-scale[-quick]/``, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.env import collect, git_revision, load_average
from benchmarks.harness.proc import option_args
from benchmarks.harness.session import out_dir_for
from benchmarks.scale.report import markdown, plot

RESULTS = Path(__file__).resolve().parents[1] / "results"
#: Seconds a client process may take to exit after its output ended.
CLIENT_TIMEOUT = 60.0
PhaseHook = Callable[[str], None]
BODY_SIZE = 32
IDLE_FIXED_WAIT = 0.4


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run measures (``--quick`` shrinks every axis)."""

    partitions: tuple[int, ...] = (4, 64, 512, 2048, 8192)
    min_messages: int = 200_000
    #: The stand-in's largest batch: every fetch returns a full batch at every P, so the cost
    #: per message compares like for like across sizes.
    messages_per_partition: int = 64
    idle_partitions: int = 2048
    idle_warmup: float = 8.0
    idle_seconds: float = 20.0
    #: First-message latency samples of an idle partition per idle cell.
    idle_samples: int = 10
    connect_partitions: tuple[int, ...] = (4, 64, 512, 2048, 8192)
    produce_topics: tuple[int, ...] = (1, 16, 256)
    produce_messages: int = 100_000
    group_members: tuple[int, ...] = (2, 4, 8)
    group_partitions: int = 256
    group_idle_seconds: float = 10.0
    rounds: int = 1


QUICK = Plan(
    partitions=(4, 64, 512),
    min_messages=20_000,
    idle_partitions=256,
    idle_warmup=4.0,
    idle_seconds=4.0,
    idle_samples=2,
    connect_partitions=(4, 64, 512),
    produce_topics=(1, 16),
    produce_messages=20_000,
    group_members=(2,),
    group_idle_seconds=3.0,
)


class Cluster:
    """A stand-in cluster process (see :mod:`benchmarks.scale.cluster`)."""

    def __init__(self, topics: dict[str, int]) -> None:
        args = [f"{name}:{count}" for name, count in topics.items()]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.scale.cluster", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.master = self._line().strip()
        self.started = time.monotonic()

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the stand-in cluster ended (code {self.proc.wait(10)})")
        return line

    def ask(self, command: str) -> dict[str, Any]:
        """Send one command, return its JSON answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._line())
        return answer

    def close(self) -> None:
        """End the process (closing its input stops it)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def client(
    mode: str, master: str, *args: object, on_phase: PhaseHook | None = None
) -> dict[str, Any]:
    """Run one measured client process; its last JSON line. ``on_phase`` sees each
    ``{"phase": ...}`` line as it comes (the client waits for nothing meanwhile).

    Raises:
        RuntimeError: the client failed (its stderr tail in the message).
    """
    argv = [sys.executable, "-m", "benchmarks.scale.client", mode, "--master", master]
    with subprocess.Popen(
        [*argv, *(str(a) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        last: dict[str, Any] | None = None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            got = json.loads(line)
            if "phase" in got and on_phase is not None:
                on_phase(got["phase"])
            else:
                last = got
        errors = proc.stderr.read()
        code = proc.wait(CLIENT_TIMEOUT)
    if code != 0 or last is None:
        raise RuntimeError(f"{mode} client failed ({code}): {errors[-2000:]}")
    return last


def measured(cluster: Cluster, mode: str, *args: object) -> dict[str, Any]:
    """One client run against ``cluster``, with the cluster's CPU meanwhile as a share of one
    core (``cluster_cpu_share``)."""
    cpu0, began = float(cluster.ask("stats")["cpu_s"]), time.monotonic()
    got = client(mode, cluster.master, *args)
    cpu = float(cluster.ask("stats")["cpu_s"]) - cpu0
    got["cluster_cpu_share"] = round(cpu / max(time.monotonic() - began, 1e-9), 3)
    return got


def keep(cells: list[dict[str, Any]], got: dict[str, Any]) -> None:
    """Record one cell and show it (progress on stdout)."""
    print(json.dumps(got), flush=True)
    cells.append(got)


def consume_cells(plan: Plan) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for partitions in plan.partitions:
        messages = max(plan.min_messages, plan.messages_per_partition * partitions)
        for n in range(plan.rounds):
            with Cluster({"scale": partitions}) as cluster:
                cluster.ask(f"fill scale {messages} {BODY_SIZE}")
                got = measured(
                    cluster, "consume", "--partitions", partitions, "--messages", messages
                )
                got.update(partitions=partitions, round=n + 1)
            keep(cells, got)
    return cells


def idle_cells(plan: Plan) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for max_wait in (None, IDLE_FIXED_WAIT):
        with Cluster({"idle": plan.idle_partitions}) as cluster:
            args: list[object] = ["--topic", "idle", "--partitions", plan.idle_partitions]
            args += ["--warmup", plan.idle_warmup, "--seconds", plan.idle_seconds]
            args += ["--samples", plan.idle_samples]
            if max_wait is not None:
                args += ["--max-wait", max_wait]
            got = measured(cluster, "idle", *args)
            got.update(partitions=plan.idle_partitions, policy="fixed" if max_wait else "backoff")
        keep(cells, got)
    return cells


#: ``--rest`` of the second connect run of each size: no partition connected during the run is
#: polled again meanwhile, so its CPU is the connects' own.
CONNECT_REST = 60.0


def connect_cells(plan: Plan) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for partitions in plan.connect_partitions:
        with Cluster({"scale": partitions}) as cluster:
            got = client("connect", cluster.master, "--partitions", partitions)
            args = ["--partitions", partitions, "--group", "scale-rest", "--rest", CONNECT_REST]
            rest = client("connect", cluster.master, *args)
        got["partitions"] = partitions
        got["rest"] = rest
        keep(cells, got)
    return cells


def produce_cells(plan: Plan) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for topics in plan.produce_topics:
        with Cluster({f"t{i}": 1 for i in range(topics)}) as cluster:
            got = client(
                "produce", cluster.master, "--topics", topics, "--messages", plan.produce_messages
            )
        got["topics"] = topics
        keep(cells, got)
    return cells


def _master_requests(stats: dict[str, Any]) -> int:
    return sum(int(n) for n in stats["requests"]["master"].values())


def group_cells(plan: Plan) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for members in plan.group_members:
        with Cluster({"scale": plan.group_partitions}) as cluster:
            marks: dict[str, tuple[float, int]] = {}

            def mark(
                phase: str,
                cluster: Cluster = cluster,
                marks: dict[str, tuple[float, int]] = marks,
            ) -> None:
                marks[phase] = (time.monotonic(), _master_requests(cluster.ask("stats")))

            options = option_args(
                ("--members", members),
                ("--partitions", plan.group_partitions),
                ("--seconds", plan.group_idle_seconds),
            )
            got = client("group", cluster.master, *options, on_phase=mark)
        (t0, n0), (t1, n1) = marks["settled"], marks["idle_done"]
        got.update(members=members, partitions=plan.group_partitions)
        got["idle_master_requests_per_s"] = round((n1 - n0) / (t1 - t0), 2)
        keep(cells, got)
    return cells


def run(plan: Plan, quick: bool) -> dict[str, Any]:
    """Every cell of ``plan``; the result document (``raw.json``)."""
    env = collect()
    began = time.monotonic()
    result: dict[str, Any] = {"env": env, "plan": asdict(plan), "quick": quick}
    result["consume"] = consume_cells(plan)
    result["idle"] = idle_cells(plan)
    result["connect"] = connect_cells(plan)
    result["produce"] = produce_cells(plan)
    result["group"] = group_cells(plan)
    env["load_average_end"] = load_average()
    result["seconds"] = round(time.monotonic() - began, 1)
    return result


def main(argv: Sequence[str]) -> int:
    """Entry point: ``--quick`` (small sizes, about a minute) or the full run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, help="consume rounds per size (default 1)")
    parser.add_argument("--out", type=Path, help="result directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.rounds:
        plan = Plan(**{**asdict(plan), "rounds": args.rounds})
    result = run(plan, args.quick)
    if args.out is None:
        out = out_dir_for(RESULTS, git_revision() + ("-scale-quick" if args.quick else "-scale"))
    else:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
    result["plots"] = plot(result, out)
    (out / "raw.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    print(f"results in {out}")
    return 0
