"""One benchmark run: cluster and topics, pre-fill, interleaved rounds, client-side floor.

:func:`run_bench` is the whole thing (``python -m benchmarks`` calls it without a cluster and
gets its own; the smoke test passes the session cluster and an existing topic).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, env, report
from benchmarks.harness.config import BenchConfig
from benchmarks.harness.estimate import estimate
from benchmarks.harness.plan import (
    Cell,
    TopicPlan,
    Variant,
    cells,
    consume_command,
    e2e_command,
    latency_command,
    produce_command,
    variants,
)
from benchmarks.harness.proc import ClientRun, option_args, run_client
from benchmarks.peers.build import BuildError, build_go, build_java, go_build_source
from tubemq_aio.testing import LocalCluster

#: Topic memory cache used for benchmark topics (the default 3 MB gives 419 overflows).
TOPIC_CACHE = {"memCacheMsgSizeInMB": 32, "memCacheMsgCntInK": 50}
CONSUME_IDLE_SECONDS = 20.0


def log(msg: str) -> None:
    """Print a progress line on stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


PRODUCE_KEEP = "20m"
"""Retention of the produce topics. The broker checks every 3 minutes and keeps each
partition's newest 256 MB segment, so the disk holds about 20 minutes of writes."""
LOW_DISK_GB = 5.0
"""Below this much free space on the broker's disk, each run logs a warning."""
READ_KEEP = "168h"
"""Retention of the topics that rounds read again (consume, Spark)."""


async def create_bench_topics(
    cluster: LocalCluster, names: Sequence[str], partitions: int, keep: str = PRODUCE_KEEP
) -> None:
    """Create ``names`` in one master call with :data:`TOPIC_CACHE`, wait until publishable.

    ``LocalCluster.create_topics`` has no way to pass topic settings, so the record is added
    through the master web API directly (same call plus the cache settings). ``keep`` is how
    long the broker keeps their data (``deletePolicy``): produce topics are never read back and
    keep it for :data:`PRODUCE_KEEP` only (with one hour the full matrix filled an 80 GB disk);
    the pre-filled consume and Spark topics are read in every round and keep it for
    :data:`READ_KEEP` (with one hour, the rounds after the first hour read a topic with its
    oldest segments gone).
    """
    ids = [b.broker_id for b in cluster.brokers]
    await cluster.web_api.call(
        "admin_add_new_topic_record",
        modify=True,
        topicName=list(names),
        brokerId=ids,
        numPartitions=partitions,
        numTopicStores=1,
        deletePolicy=f"delete,{keep}",
        acceptPublish=True,
        acceptSubscribe=True,
        **TOPIC_CACHE,
    )
    for name in names:
        cluster.topics[name] = partitions * len(ids)
    await cluster.wait_topics_ready(names)


async def topic_cache_settings(cluster: LocalCluster, name: str) -> dict[str, object]:
    """The ``memCache*`` settings the master reports for ``name`` (to record what was used)."""
    found: dict[str, object] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key.startswith("memCache") and not isinstance(value, dict | list):
                    found.setdefault(key, value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    try:
        walk(await cluster.web_api.call("admin_query_topic_info", topicName=name))
    except Exception as exc:  # recorded, never fatal
        found["error"] = str(exc)
    return found


def out_dir_for(parent: Path, rev: str) -> Path:
    """``parent/<YYYY-MM-DD>-<rev>``, with ``-2``, ``-3`` ... when it already exists."""
    base = parent / f"{time.strftime('%Y-%m-%d', time.gmtime())}-{rev}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


class Bench:
    """Runs the rounds of one configuration against one cluster and collects every run."""

    def __init__(
        self, cfg: BenchConfig, cluster: LocalCluster, topics: TopicPlan, out: Path, pin: bool
    ) -> None:
        """Bind the run (see :func:`run_bench`)."""
        self.cfg = cfg
        self.cluster = cluster
        self.topics = topics
        self.out = out
        self.pin = pin
        self.run_id = uuid.uuid4().hex[:6]
        self.runs: list[dict[str, Any]] = []
        self.filled: dict[str, int] = {}
        self.java_ok = False
        self.go_ok = False

    @property
    def broker_pids(self) -> list[int]:
        """Pids of the broker JVMs (their CPU is reported per round)."""
        return [b.pid for b in self.cluster.brokers if b.pid is not None]

    def _argv(self, argv: list[str]) -> list[str]:
        return ["taskset", "-c", "1", *argv] if self.pin else argv

    async def _client(self, argv: list[str], name: str) -> ClientRun:
        return await run_client(
            self._argv(argv),
            broker_pids=self.broker_pids,
            timeout=self.cfg.run_timeout,
            stderr_path=self.out / "raw" / f"{name}.stderr.log",
            cwd=env.REPO,
        )

    async def prefill(self, sizes: Sequence[int]) -> None:
        """Make sure each consume topic holds enough messages (sent by our client, W = 256)."""
        for size in sizes:
            topic = self.topics.consume[size]
            need = int(self.cfg.count_for(size) * 1.1) + 1000 - self.filled.get(topic, 0)
            if need <= 0:
                continue
            log(f"pre-filling {topic} with {need} x {size} B")
            variant = Variant("aio-asyncio", "aio", "asyncio", "closed")
            argv = produce_command(variant, self.cluster.master_addr, topic, need, size, 256, 0)
            run = await self._client(argv, f"prefill-{topic}")
            sent = int(run.record["messages"]) if run.record else 0
            self.filled[topic] = self.filled.get(topic, 0) + sent
            if sent < need:
                log(f"WARNING pre-fill of {topic}: {sent} of {need} sent ({run.error})")

    async def run_one(self, cell: Cell, v: Variant, rnd: int) -> dict[str, Any]:
        """Run variant ``v`` once in ``cell``; return the run's entry for ``raw.json``."""
        cfg, master = self.cfg, self.cluster.master_addr
        count = cfg.count_for(cell.size, cell.scenario, cell.window)
        name = f"r{rnd}-{cell.scenario}-{cell.size}-w{cell.window}-{v.name}"
        if cell.scenario == "produce":
            topic = self.topics.produce[(v.name, cell.size)]
            window = cell.window or 1
            warmup = cfg.warmup_for(v.client)
            argv = produce_command(v, master, topic, count, cell.size, window, warmup)
        elif cell.scenario == "latency":
            topic = self.topics.produce[(v.name, cell.size)]
            rate = cell.rate or 1000
            argv = latency_command(
                v, master, topic, cell.size, rate, cfg.latency_seconds, cfg.latency_warmup_seconds
            )
        elif cell.scenario == "e2e":
            topic = self.topics.produce[(v.name, cell.size)]
            group = f"e{self.run_id}_{v.name.replace('-', '_')}_{rnd}"
            argv = e2e_command(
                v,
                master,
                topic,
                group,
                cell.size,
                cell.rate or 1000,
                cfg.e2e_seconds,
                cfg.e2e_warmup_seconds,
            )
        else:
            topic = self.topics.consume[cell.size]
            group = f"g{self.run_id}_{v.name.replace('-', '_')}_{rnd}"
            argv = consume_command(v, master, topic, group, count, CONSUME_IDLE_SECONDS)
        run = await self._client(argv, name)
        rec = run.record or {}
        if cell.scenario in ("produce", "latency", "e2e") and run.record is not None:
            sent = int(rec.get("messages", 0)) + int(rec.get("warmup_messages", 0))
            self.filled[topic] = self.filled.get(topic, 0) + sent
        entry: dict[str, Any] = {
            "round": rnd,
            "discarded": rnd == 0 and cfg.discard_first,
            "scenario": cell.scenario,
            "size": cell.size,
            "window": cell.window,
            "rate": cell.rate,
            "variant": v.name,
            "client": v.client,
            "loop": v.loop,
            "mode": v.mode,
            "topic": topic,
            "wall_seconds": round(run.wall_seconds, 3),
            "returncode": run.returncode,
            "error": run.error,
            "peak_rss_mb": round(run.peak_rss_bytes / 2**20, 1),
            "peer": run.record,
            "requested": count,
            "disk_free_gb": round(shutil.disk_usage(self.cluster.work_dir).free / 1e9, 1),
        }
        messages = int(rec.get("messages") or 0)
        seconds = float(rec.get("seconds") or 0.0)
        cpu = rec.get("cpu_seconds")
        entry["ok"] = run.record is not None and messages > 0 and seconds > 0
        if entry["ok"]:
            entry["msg_per_s"] = round(messages / seconds, 1)
            entry["mb_per_s"] = round(int(rec.get("bytes") or 0) / seconds / 1e6, 3)
            entry["cpu_s_per_1e6"] = round(float(cpu) / messages * 1e6, 3) if cpu else None
            entry["errors"] = int(rec.get("errors") or 0)
            for name, value in (rec.get("latency") or {}).items():
                if name.endswith("_ms"):
                    entry[f"latency_{name}"] = value
            for name in ("p50_ms", "p99_ms"):  # how late the open-loop sender issued its sends
                if (rec.get("schedule_lag") or {}).get(name) is not None:
                    entry[f"lag_{name}"] = rec["schedule_lag"][name]
            if run.broker_cpu_seconds is not None:
                entry["broker_cpu_s"] = round(run.broker_cpu_seconds, 3)
                entry["broker_cores"] = round(run.broker_cpu_seconds / seconds, 3)
                entry["broker_cpu_s_per_1e6"] = round(run.broker_cpu_seconds / messages * 1e6, 3)
        return entry

    async def rounds(self) -> None:
        """All rounds; each round runs every cell, variants in A B C / C B A order."""
        plan = cells(self.cfg)
        per_round = sum(len(variants(self.cfg, c.scenario, self.java_ok, self.go_ok)) for c in plan)
        total, done = per_round * self.cfg.rounds, 0
        for rnd in range(self.cfg.rounds):
            for cell in plan:
                vs = variants(self.cfg, cell.scenario, self.java_ok, self.go_ok)
                for v in vs if rnd % 2 == 0 else list(reversed(vs)):
                    entry = await self.run_one(cell, v, rnd)
                    self.runs.append(entry)
                    done += 1
                    log(f"{done}/{total} round {rnd} {cell.label} {v.name}: {_brief(entry)}")
                    if entry["disk_free_gb"] < LOW_DISK_GB:
                        log(
                            f"WARNING only {entry['disk_free_gb']} GB free on the broker's disk; "
                            "when it fills, the broker stops every write"
                        )

    async def spark(self) -> dict[str, Any]:
        """The Spark rows (:mod:`~benchmarks.harness.spark_worker`): fill the source topic with
        ``spark_rows`` x 1 KB, then one Spark session runs every round of the Spark cases.

        Not pinned: Spark's ``local[2]`` uses both CPUs (the broker shares CPU 0).
        """
        rows, size = self.cfg.spark_rows, 1024
        src, sink = self.topics.spark_source, self.topics.spark_sink
        log(f"spark: filling {src} with {rows} x {size} B")
        variant = Variant("aio-asyncio", "aio", "asyncio", "closed")
        argv = produce_command(variant, self.cluster.master_addr, src, rows, size, 256, 0)
        fill = await self._client(argv, f"prefill-{src}")
        sent = int(fill.record["messages"]) if fill.record else 0
        if sent < rows or (fill.record or {}).get("errors"):
            log(f"WARNING spark pre-fill: {sent} of {rows} sent ({fill.error})")
        servers = ",".join(str(n.pid) for n in self.cluster.nodes if n.pid is not None)
        options = option_args(
            ("--master", self.cluster.master_addr),
            ("--topic", src),
            ("--rows", sent),
            ("--sink-topic", sink),
            ("--size", size),
            ("--partitions", self.cfg.partitions),
            ("--rounds", self.cfg.rounds),
            ("--server-pids", servers),
        )
        argv = [sys.executable, "-m", "benchmarks.harness.spark_worker", *options]
        log(f"spark: {self.cfg.rounds} rounds of read, stream, sink ({sent} rows each)")
        t0 = time.monotonic()
        runs: list[dict[str, Any]] = []
        errors = self.out / "raw" / "spark.stderr.log"
        errors.parent.mkdir(parents=True, exist_ok=True)
        with errors.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=err, cwd=env.REPO
            )
            assert proc.stdout is not None
            try:
                async with asyncio.timeout(self.cfg.run_timeout * 6 * self.cfg.rounds):
                    async for raw in proc.stdout:
                        line = raw.decode(errors="replace").strip()
                        if line.startswith("{"):
                            runs.append(json.loads(line))
                            log(f"spark: {runs[-1]}")
                    await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        return {
            "rows": sent,
            "size": size,
            "topic": src,
            "sink_topic": sink,
            "partitions": self.cfg.partitions,
            "cores": 2,
            "returncode": proc.returncode,
            "seconds": round(time.monotonic() - t0, 1),
            "runs": runs,
        }


def _brief(e: dict[str, Any]) -> str:
    if not e["ok"]:
        return f"FAILED {e['error']}"
    cpu = e.get("cpu_s_per_1e6")
    cores = e.get("broker_cores")
    text = f"{e['msg_per_s']:,.0f} msg/s, {cpu} CPU-s/1e6 msg, RSS {e['peak_rss_mb']} MB"
    if cores is not None:
        text += f", broker {cores:.2f} cores"
    if e.get("errors"):
        text += f", {e['errors']} errors"
    return text + (" (discarded)" if e["discarded"] else "")


def run_floor(loops: Sequence[str], timeout: float = 600.0) -> dict[str, Any]:
    """Run ``benchmarks.micro.codec`` and ``benchmarks.micro.transport`` (mode ``rpc``, the
    production call path).

    Runs before the cluster starts, unpinned (the transport bench spawns its own echo server).
    """
    floor: dict[str, Any] = {"codec": [], "transport": [], "note": "before the cluster, unpinned"}

    def lines(argv: list[str]) -> list[dict[str, Any]]:
        out = subprocess.run(
            [sys.executable, "-m", *argv],
            capture_output=True,
            text=True,
            check=False,
            cwd=env.REPO,
            timeout=timeout,
        )
        if out.returncode != 0:
            floor.setdefault("errors", []).append(f"{argv}: exit {out.returncode}: {out.stderr}")
        return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]

    log("floor: benchmarks.micro.codec")
    floor["codec"] = lines(["benchmarks.micro.codec"])
    for loop in loops:
        log(f"floor: benchmarks.micro.transport --mode rpc ({loop})")
        extra = ["--uvloop"] if loop == "uvloop" else []
        argv = ["benchmarks.micro.transport", "--mode", "rpc", "--size", "1024", *extra]
        floor["transport"] += lines(argv)
    return floor


async def run_bench(
    cfg: BenchConfig,
    *,
    cluster: LocalCluster | None = None,
    topics: TopicPlan | None = None,
) -> Path:
    """Run the benchmark; write ``raw.json``, ``summary.md`` (and PNGs); return the directory.

    Args:
        cfg: What to run.
        cluster: A running cluster to use (default: start a 1-broker cluster, pinned to CPU 0
            when possible, and stop it at the end).
        topics: Topics to use on ``cluster`` (default: create fresh ones with a 32 MB cache).
    """
    info = env.collect()
    out = out_dir_for(cfg.out, info["git_revision"])
    log(f"results -> {out}")
    java: dict[str, Any] = {"status": "not requested"}
    if "java" in cfg.clients:
        try:
            jar = await asyncio.to_thread(build_java)
            # Relative to the repository: result files must not carry machine paths.
            where = jar.relative_to(env.REPO) if jar.is_relative_to(env.REPO) else jar.name
            java = {"status": "ok", "jar": str(where)}
        except BuildError as exc:
            java = {"status": f"blocked: {exc}"}
            log(f"java peer unavailable: {exc}")
    go: dict[str, Any] = {"status": "not requested"}
    if "go" in cfg.clients:
        try:
            binary = await asyncio.to_thread(build_go)
            go = {
                "status": "ok",
                "binary": str(binary.relative_to(env.REPO)),
                "client_source": go_build_source(),
            }
        except BuildError as exc:
            # The first line says why; the rest is the tool's output (with registry addresses).
            go = {"status": f"blocked: {str(exc).splitlines()[0]}"}
            log(f"go peer unavailable: {exc}")
    log(estimate(cfg, java["status"] == "ok", go["status"] == "ok").line())
    floor = await asyncio.to_thread(run_floor, cfg.loops) if cfg.floor else None
    if cluster is None:
        log("starting a local TubeMQ cluster (1 master, 1 broker)")
        async with LocalCluster(1, topic_partitions=cfg.partitions) as own:
            return await _measure(cfg, own, topics, out, info, java, go, floor, own_cluster=True)
    return await _measure(cfg, cluster, topics, out, info, java, go, floor, own_cluster=False)


async def _measure(
    cfg: BenchConfig,
    cluster: LocalCluster,
    topics: TopicPlan | None,
    out: Path,
    info: dict[str, Any],
    java: dict[str, Any],
    go: dict[str, Any],
    floor: dict[str, Any] | None,
    *,
    own_cluster: bool,
) -> Path:
    pin_ok, pin_note = env.can_pin()
    pinning = {"requested": cfg.pin, "servers": False, "client": False, "note": pin_note}
    if cfg.pin and pin_ok and own_cluster:
        errors = env.pin_pids([n.pid for n in cluster.nodes if n.pid is not None], 0)
        pinning.update(servers=not errors, client=True, note="; ".join([pin_note, *errors]))
    elif cfg.pin and pin_ok:
        pinning.update(client=True, note="client on CPU 1; servers of a shared cluster not pinned")
    elif not cfg.pin:
        pinning["note"] = "disabled (--no-pin)"
    clients = ["aio-asyncio", "aio-uvloop", "java", *(["go"] if go["status"] == "ok" else [])]
    if topics is None:
        t0 = time.monotonic()
        topics = TopicPlan.fresh(uuid.uuid4().hex[:4], clients, cfg.sizes)
        if "spark" not in cfg.scenarios:
            topics.spark_source = topics.spark_sink = ""
        log(f"creating {len(topics.names())} topics ({cfg.partitions} partitions, 32 MB cache)")
        read = {*topics.consume.values(), topics.spark_source, topics.spark_sink} - {""}
        await create_bench_topics(
            cluster, [t for t in topics.names() if t not in read], cfg.partitions
        )
        await create_bench_topics(cluster, sorted(read), cfg.partitions, keep=READ_KEEP)
        log(f"topics ready in {time.monotonic() - t0:.0f}s")
    reported = await topic_cache_settings(cluster, topics.names()[0])
    log(f"topic cache settings reported by the master: {reported}")
    bench = Bench(cfg, cluster, topics, out, pin=bool(pinning["client"]))
    bench.java_ok = java["status"] == "ok"
    bench.go_ok = go["status"] == "ok"
    if "consume" in cfg.scenarios:
        await bench.prefill(cfg.sizes)
    t_start = time.monotonic()
    spark: dict[str, Any] | None = None
    try:
        await bench.rounds()
        if "spark" in cfg.scenarios:
            spark = await bench.spark()
    finally:
        info["load_average_end"] = env.load_average()
        info["measure_seconds"] = round(time.monotonic() - t_start, 1)
        raw = {
            "env": info,
            "config": cfg.as_dict(),
            "pinning": pinning,
            "cluster": {
                "version": cluster.version,
                "brokers": len(cluster.brokers),
                "own": own_cluster,
                "topic_settings": TOPIC_CACHE if own_cluster else {},
                "topic_settings_reported": reported,
            },
            "topics": {
                "produce": {f"{c}/{s}": t for (c, s), t in topics.produce.items()},
                "consume": {str(s): t for s, t in topics.consume.items()},
            },
            "peers": {"java": java, "go": go},
            "floor": floor,
            "runs": bench.runs,
            "spark": spark,
        }
        report.write_all(out, raw)
    if cfg.quick:
        _compare(raw, cfg.out, out)
    log(f"done: {out / 'summary.md'}")
    return out


def _compare(raw: dict[str, Any], results: Path, out: Path) -> None:
    """Print (and keep in ``comparison.md``) the cells that moved since the newest committed
    run of the same cells; a report, never a failure."""
    try:
        base, moves = compare.compare_with_committed(raw, results, env.REPO, exclude=out)
        text = compare.report(base, moves, env.REPO)
        (out / "comparison.md").write_text(text + "\n")
    except Exception as exc:  # the comparison must never cost the run
        text = f"comparison with the committed runs failed: {exc!r}"
    log(text)
