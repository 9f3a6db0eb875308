"""Turn the runs into ``raw.json``, ``summary.md`` and (when matplotlib is present) PNG plots.

Ratios are per round: in round ``r`` of a cell, ``aio variant / java`` (and ``/ go`` when the Go
peer ran) for throughput (msg/s,
> 1 = ours faster) and for client CPU-seconds per 10**6 messages (< 1 = ours cheaper). A cell
reports the median of those per-round ratios with a bootstrap 95 % interval, plus the absolute
medians of every variant. Discarded (first) rounds and failed runs are left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.harness.plan import BASELINES
from benchmarks.harness.plots import all_plots
from benchmarks.harness.spark_report import analyse_spark, spark_markdown
from benchmarks.harness.stats import bootstrap_ci, median

Key = tuple[str, int, int | None, int | None]
LATENCY = (
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_max_ms",
)
METRICS = (
    "msg_per_s",
    "mb_per_s",
    "cpu_s_per_1e6",
    "peak_rss_mb",
    "broker_cores",
    "broker_cpu_s_per_1e6",
    *LATENCY,
    "lag_p50_ms",
    "lag_p99_ms",
)
#: Latency percentiles reported with an interval and as per-round ratios against the peers.
KEY_LATENCY = (("p50", "latency_p50_ms"), ("p99", "latency_p99_ms"))


def _kept(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if r["ok"] and not r["discarded"]]


def analyse(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Absolute medians per (cell, variant) and per-round ratios against the Java and Go peers."""
    by_cell: dict[Key, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in _kept(runs):
        key = (r["scenario"], r["size"], r["window"], r.get("rate"))
        by_cell[key][r["variant"]].append(r)
    failed = [r for r in runs if not r["ok"]]
    cells_out: list[dict[str, Any]] = []
    for (scenario, size, window, rate), per_variant in by_cell.items():
        absolute: dict[str, dict[str, Any]] = {}
        for variant, rs in per_variant.items():
            row: dict[str, Any] = {"n": len(rs), "errors": sum(int(r.get("errors", 0)) for r in rs)}
            for m in METRICS:
                vals = [float(r[m]) for r in rs if r.get(m) is not None]
                row[m] = median(vals)
                if m in dict(KEY_LATENCY).values():
                    row[f"{m}_ci95"] = bootstrap_ci(vals)
            absolute[variant] = row
        ratios = {b: _ratios(per_variant, b) for b in BASELINES if per_variant.get(b)}
        cells_out.append(
            {
                "scenario": scenario,
                "size": size,
                "window": window,
                "rate": rate,
                "absolute": absolute,
                "ratios": ratios.get("java", {}),
                "ratios_go": ratios.get("go", {}),
            }
        )
    return {"cells": cells_out, "failed_runs": len(failed)}


def _ratios(per_variant: dict[str, list[dict[str, Any]]], baseline: str) -> dict[str, Any]:
    """Per our variant: median and bootstrap CI of per-round ratios against ``baseline``."""
    base = {r["round"]: r for r in per_variant[baseline]}
    out: dict[str, Any] = {}
    for variant, rs in per_variant.items():
        if variant in BASELINES:
            continue
        speed, cpu = [], []
        latency: dict[str, list[float]] = {name: [] for name, _ in KEY_LATENCY}
        for r in rs:
            b = base.get(r["round"])
            if b is None:
                continue
            speed.append(r["msg_per_s"] / b["msg_per_s"])
            if r.get("cpu_s_per_1e6") and b.get("cpu_s_per_1e6"):
                cpu.append(r["cpu_s_per_1e6"] / b["cpu_s_per_1e6"])
            for name, m in KEY_LATENCY:
                if r.get(m) and b.get(m):
                    latency[name].append(r[m] / b[m])
        out[variant] = {
            "n": len(speed),
            "throughput": median(speed),
            "throughput_ci95": bootstrap_ci(speed),
            "throughput_rounds": [round(x, 4) for x in speed],
            "cpu": median(cpu),
            "cpu_ci95": bootstrap_ci(cpu),
            "cpu_rounds": [round(x, 4) for x in cpu],
        }
        for name, xs in latency.items():
            if xs:  # latency cells only: ours / peer, < 1 = ours answers sooner
                out[variant][name] = median(xs)
                out[variant][f"{name}_ci95"] = bootstrap_ci(xs)
                out[variant][f"{name}_rounds"] = [round(x, 4) for x in xs]
    return out


def floor_vs_real(raw: dict[str, Any], summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Predicted client CPU per produced 1 KB message (codec + transport) vs the measured one."""
    floor = raw.get("floor")
    if not floor:
        return []
    codec = {c["case"]: float(c["us_per_op"]) for c in floor.get("codec", [])}
    rows = []
    for t in floor.get("transport", []):
        loop = t.get("loop")
        encode, decode = codec.get("send_request_1k"), codec.get("send_response")
        if encode is None or decode is None:
            continue
        predicted = encode + decode + float(t["us_cpu_per_call"])
        real = {}
        for cell in summary["cells"]:
            if cell["scenario"] == "produce" and cell["size"] == 1024:
                row = cell["absolute"].get(f"aio-{loop}")
                if row and row.get("cpu_s_per_1e6") is not None:
                    real[f"W={cell['window']}"] = row["cpu_s_per_1e6"]  # CPU-s/1e6 msg = us/msg
        rows.append(
            {
                "loop": loop,
                "encode_us": encode,
                "decode_us": decode,
                "transport_us_cpu": float(t["us_cpu_per_call"]),
                "floor_us_per_msg": round(predicted, 3),
                "real_us_per_msg": real,
            }
        )
    return rows


def _f(x: float | None, fmt: str = ",.0f") -> str:
    return "–" if x is None else format(x, fmt)


def _go_status(go: dict[str, Any]) -> str:
    source = go.get("client_source")
    if go["status"] == "ok" and source == "local source":
        return "ok (client module built from a local source, `TUBEMQ_GO_CLIENT_SRC`)"
    return str(go["status"])


def _cell_label(c: dict[str, Any]) -> str:
    w = f", W={c['window']}" if c["window"] is not None else ""
    r = f", {c['rate']:,} msg/s offered" if c.get("rate") is not None else ""
    return f"{c['scenario']} {c['size']} B{w}{r}"


_LATENCY_TABLES = (
    (
        "latency",
        "Open-loop send latency (ms from the intended send time to the answer: ours "
        "`await send`, Java `sendMessage` with a callback, Go has no asynchronous send; medians "
        "over rounds [bootstrap 95 % CI]; lag = how late the send call started, the sender's "
        "own share)",
    ),
    (
        "e2e",
        "End-to-end latency (ms from the intended send time written in the body to the "
        "consumer's receipt, not-found wait 10 ms; medians over rounds [bootstrap 95 % CI]; CPU is "
        "producer + consumer in one process)",
    ),
)


def _with_ci(value: float | None, ci: list[float] | tuple[float, float] | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.2f}"


def _latency_table(cells: list[dict[str, Any]], title: str) -> list[str]:
    if not cells:
        return []
    lag = cells[0]["scenario"] == "latency"
    lines = [
        "",
        f"## {title}",
        "",
        "| cell | variant | n | achieved msg/s | p50 | p90 | p99 | p99.9 | max "
        + ("| lag p50 / p99 " if lag else "")
        + "| client CPU-s / 10⁶ msg | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if lag else ""),
    ]
    for c in cells:
        for v, a in sorted(c["absolute"].items()):
            p50 = _with_ci(a["latency_p50_ms"], a.get("latency_p50_ms_ci95"))
            p99 = _with_ci(a["latency_p99_ms"], a.get("latency_p99_ms_ci95"))
            rest = (
                _f(a["latency_p90_ms"], ".2f"),
                _f(a["latency_p999_ms"], ".2f"),
                _f(a["latency_max_ms"], ".2f"),
            )
            lines.append(
                f"| {_cell_label(c)} | {v} | {a['n']} | {_f(a['msg_per_s'])} | {p50} | "
                f"{rest[0]} | {p99} | {rest[1]} | {rest[2]} | "
                + (f"{_f(a['lag_p50_ms'], '.2f')} / {_f(a['lag_p99_ms'], '.2f')} | " if lag else "")
                + f"{_f(a['cpu_s_per_1e6'], '.1f')} | {a['errors']} |"
            )
    ratio_rows = [
        f"| {_cell_label(c)} | {v} | {r['n']} | {_with_ci(r['p50'], r.get('p50_ci95'))} | "
        f"{_with_ci(r.get('p99'), r.get('p99_ci95'))} |"
        for c in cells
        for v, r in sorted(c.get("ratios", {}).items())
        if r.get("p50") is not None
    ]
    if ratio_rows:
        lines += [
            "",
            "Latency ratios tubemq-aio / Java (median of per-round ratios [bootstrap "
            "95 % CI]; < 1: ours answers sooner):",
            "",
            "| cell | variant | n | p50 ratio | p99 ratio |",
            "|---|---|---|---|---|",
            *ratio_rows,
        ]
    return lines


def markdown(raw: dict[str, Any], summary: dict[str, Any]) -> str:
    """The human summary: set-up, ratio table, absolute medians, blocked peers, floor."""
    e, cfg, pin = raw["env"], raw["config"], raw["pinning"]
    lines = [
        "# tubemq-aio benchmark summary",
        "",
        f"- git {e['git_revision']}; Python {e['python']}, protobuf {e['protobuf']}, "
        f"uvloop {e['uvloop']}; JDK `{e['jdk']}`; TubeMQ server {raw['cluster']['version']}",
        f"- CPU `{e['cpu_model']}` × {e['cpus']}; kernel {e['kernel']}; load average "
        f"{e.get('load_average_start')} at start, {e.get('load_average_end')} at end",
        f"- pinning: servers {'CPU 0' if pin['servers'] else 'not pinned'}, client "
        f"{'CPU 1' if pin['client'] else 'not pinned'} ({pin['note']})",
        f"- sizes {cfg['sizes']}, W {cfg['windows']}, {cfg['rounds']} rounds "
        f"({'first discarded' if cfg['discard_first'] else 'none discarded'}), messages/run "
        f"{cfg['messages']}, produce warm-up {cfg['warmup_seconds']} s "
        f"(Java {cfg.get('java_warmup_seconds', cfg['warmup_seconds'])} s), "
        f"{cfg['partitions']} partitions; topic settings "
        f"{raw['cluster'].get('topic_settings') or 'as given'} (master reports "
        f"{raw['cluster'].get('topic_settings_reported')})",
        f"- Java peer: {raw['peers']['java']['status']}; Go peer: {_go_status(raw['peers']['go'])}",
        f"- failed runs: {summary['failed_runs']}; measuring took {e.get('measure_seconds')} s",
    ]
    for field, peer in (("ratios", "Java"), ("ratios_go", "Go")):
        if not any(c.get(field) for c in summary["cells"]):
            continue
        lines += [
            "",
            f"## Ratios tubemq-aio / {peer} (median of per-round ratios [bootstrap 95 % CI])",
            "",
            "Throughput > 1: ours faster. CPU < 1: ours uses less client CPU per message.",
            "",
            "| cell | variant | n | throughput ratio | CPU/msg ratio |",
            "|---|---|---|---|---|",
        ]
        for c in summary["cells"]:
            for v, r in sorted(c.get(field, {}).items()):
                speed = _with_ci(r["throughput"], r["throughput_ci95"])
                cpu = _with_ci(r["cpu"], r["cpu_ci95"])
                lines.append(f"| {_cell_label(c)} | {v} | {r['n']} | {speed} | {cpu} |")
    lines += [
        "",
        "## Absolute medians",
        "",
        "| cell | variant | n | msg/s | MB/s | client CPU-s / 10⁶ msg | peak RSS MB "
        "| broker cores | broker CPU-s / 10⁶ msg | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in summary["cells"]:
        if c["scenario"] in ("latency", "e2e"):
            continue
        for v, a in sorted(c["absolute"].items()):
            lines.append(
                f"| {_cell_label(c)} | {v} | {a['n']} | {_f(a['msg_per_s'])} | "
                f"{_f(a['mb_per_s'], '.1f')} | {_f(a['cpu_s_per_1e6'], '.1f')} | "
                f"{_f(a['peak_rss_mb'], '.0f')} | {_f(a['broker_cores'], '.2f')} | "
                f"{_f(a['broker_cpu_s_per_1e6'], '.1f')} | {a['errors']} |"
            )
    for scenario, title in _LATENCY_TABLES:
        chosen = [c for c in summary["cells"] if c["scenario"] == scenario]
        lines += _latency_table(chosen, title)
    fr = summary.get("floor_vs_real") or []
    if fr:
        lines += [
            "",
            "## Client-side floor vs real (µs of client CPU per produced 1 KB message)",
            "",
            "| loop | encode | decode | transport | floor | real (aio produce) |",
            "|---|---|---|---|---|---|",
        ]
        for row in fr:
            real = ", ".join(f"{k}: {v:.1f}" for k, v in row["real_us_per_msg"].items()) or "–"
            lines.append(
                f"| {row['loop']} | {row['encode_us']:.2f} | {row['decode_us']:.2f} | "
                f"{row['transport_us_cpu']:.2f} | {row['floor_us_per_msg']:.2f} | {real} |"
            )
    elif raw.get("floor") is None:
        lines += ["", "Client-side floor not run (`--floor` to include it)."]
    lines += spark_markdown(raw.get("spark"))
    lines += ["", "Raw rounds: `raw.json` (per run: the client's JSON line, RSS, broker CPU).", ""]
    return "\n".join(lines)


def mark_short_reads(runs: list[dict[str, Any]], config: dict[str, Any]) -> int:
    """Fail the consume runs that read fewer messages than they were asked for; return how many.

    Such a run found its topic short (e.g. the broker deleted its oldest segments) and spent
    the rest of its time waiting for messages, so neither its rate nor its CPU per message
    measures consuming. The count asked for is the run's ``requested`` (older runs: the
    configuration's consume count of the size).
    """
    marked = 0
    for run in runs:
        if run.get("scenario") != "consume" or not run.get("ok"):
            continue
        requested = run.get("requested") or _consume_count(config, run["size"])
        read = int((run.get("peer") or {}).get("messages") or 0)
        if requested and read < requested:
            run["ok"] = False
            run["error"] = (
                f"read {read} of {requested} messages: the topic ran short "
                "(not a consume measurement)"
            )
            marked += 1
    return marked


def _consume_count(config: dict[str, Any], size: int) -> int:
    by_size = (config.get("messages") or {}).get(str(size))
    if isinstance(by_size, dict):
        return int(by_size.get("consume") or 0)
    return int(by_size or 0)


def write_all(out: Path, raw: dict[str, Any]) -> None:
    """Write ``raw.json`` (with the analysis), ``summary.md`` and the plots into ``out``."""
    mark_short_reads(raw["runs"], raw.get("config") or {})
    summary = analyse(raw["runs"])
    summary["floor_vs_real"] = floor_vs_real(raw, summary)
    if raw.get("spark"):
        raw["spark"]["analysis"] = analyse_spark(raw["spark"])
    raw["summary"] = summary
    try:
        raw["plots"] = all_plots(out, raw["runs"], raw.get("spark"))
    except Exception as exc:  # a plotting problem must never lose the measurements
        raw["plots"] = []
        raw["plots_note"] = f"plotting failed: {exc!r}"
    else:
        if not raw["plots"]:
            raw["plots_note"] = "matplotlib not installed: no PNG plots"
    (out / "raw.json").write_text(json.dumps(raw, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(markdown(raw, summary))
