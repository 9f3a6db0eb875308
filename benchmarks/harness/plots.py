"""PNG figures of a result: one panel per scenario, one colour per client in every figure.

Every bar is the median over the kept rounds with a whisker for the bootstrap 95 % interval of
that median; our bars carry their ratio against the Java (J) and Go (G) peers, or, for the
Spark panel, against PySpark's floor / our producer alone. Axes are linear with categorical
groups (W, rate), so no log-axis tick labels can collide.

A cell whose kept runs had send errors (a client overloaded at the offered rate, as the Java
peer was in e2e at 10 000 msg/s) is drawn hatched, does not set its panel's scale, is cut at
the top of the axis with its value written on it, and no ratio is taken against it.

``python -m benchmarks.harness.plots RESULT_DIR [--out DIR]`` draws a result's figures again
from its ``raw.json`` (into ``RESULT_DIR`` unless ``--out`` is given).
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.stats import bootstrap_ci, median

#: One colour per client variant, the same in every figure (colour-blind safe palette).
COLOURS = {
    "aio-asyncio": "#0072B2",
    "aio-asyncio-batch": "#0072B2",
    "aio-asyncio-iter": "#56B4E9",
    "aio-uvloop": "#009E73",
    "aio-uvloop-batch": "#009E73",
    "aio-uvloop-iter": "#8FD9B6",
    "java": "#D55E00",
    "go": "#E69F00",
    "floor": "#999999",
    "aio": "#0072B2",
    "producer": "#CC79A7",
    "client": "#56B4E9",
}
_SCENARIO_TITLES = {
    "produce": "produce (closed loop)",
    "consume": "consume (new group, earliest)",
    "latency": "open-loop send → ack",
    "e2e": "end-to-end (send → consumer)",
}

Bar = tuple[float, tuple[float, float] | None]  # median, CI


def _pyplot() -> Any:
    mpl = importlib.import_module("matplotlib")
    mpl.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _group_label(r: dict[str, Any]) -> str:
    size = f"{r['size'] // 1024} KB" if r["size"] >= 1024 else f"{r['size']} B"
    if r.get("window") is not None:
        return f"{size}\nW={r['window']}"
    if r.get("rate") is not None:
        return f"{size}\n{r['rate']:,}/s"
    return size


def _bar(values: Sequence[float]) -> Bar | None:
    m = median(values)
    return None if m is None else (m, bootstrap_ci(values))


def _ratio_text(ours: dict[int, float], peers: dict[str, dict[int, float]]) -> str:
    parts = []
    for name, base in peers.items():
        rs = [ours[r] / base[r] for r in ours if base.get(r)]
        m = median(rs)
        if m is not None:
            parts.append(f"{m:.2g}×{name}")
    return "\n".join(parts)


def bars_panel(
    ax: Any,
    groups: list[str],
    series: dict[str, dict[str, Bar]],
    notes: dict[tuple[str, str], str],
    ylabel: str,
    title: str,
    labels: dict[str, str] | None = None,
    legend: bool = True,
    flagged: dict[tuple[str, str], str] | None = None,
) -> None:
    """Grouped bars: ``series[variant][group] = (median, ci)``; ``notes`` above the bars;
    ``labels`` renames variants in the legend; ``legend=False`` leaves the legend to the
    figure (:func:`figure_legend`).

    ``flagged[(variant, group)]`` marks a cell whose runs had errors (an overloaded client):
    it does not set the axis, its bar is hatched, cut at the top of the axis when taller, and
    labelled with its value and the flag's text.
    """
    flagged = flagged or {}
    variants = list(series)
    width = 0.8 / max(1, len(variants))
    bars = [b for v, s in series.items() for g, b in s.items() if (v, g) not in flagged]
    bars = bars or [b for s in series.values() for b in s.values()]
    # The axis follows the bars: a whisker reaching far beyond every median (one stalled round
    # among three) is cut at the axis and labelled with its end, instead of flattening the bars.
    top = max(max(b[0] for b in bars) * 2.0, *(min(b[1][1], b[0] * 2.0) for b in bars if b[1]))
    top = min(top, max((b[1][1] if b[1] else b[0]) for b in bars))
    # Narrow bars: notes stand upright so that neighbours' notes cannot overlap.
    upright = len(variants) >= 3 and any(notes.values())
    limit = top * (1.55 if upright else 1.3)
    for i, variant in enumerate(variants):
        xs, ys, lo, hi = [], [], [], []
        for g, group in enumerate(groups):
            bar = series[variant].get(group)
            if bar is None:
                continue
            x = g - 0.4 + width * (i + 0.5)
            value, ci = bar
            flag = flagged.get((variant, group))
            if flag is not None:
                shown = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
                ax.bar(
                    x,
                    min(value, limit),
                    width * 0.95,
                    color=COLOURS.get(variant, "#333333"),
                    alpha=0.45,
                    hatch="///",
                    edgecolor="white",
                )
                arrow = "↑" if value > limit else ""
                ax.text(
                    x,
                    min(value, limit) * 0.985 if value > limit else value + top * 0.02,
                    f"{arrow}{shown}\n{flag}",
                    ha="center",
                    va="top" if value > limit else "bottom",
                    fontsize=6,
                    rotation=90,
                )
                continue
            xs.append(x)
            ys.append(value)
            lo.append(value - ci[0] if ci else 0.0)
            hi.append(ci[1] - value if ci else 0.0)
            if ci and ci[1] > limit:
                end = f"{ci[1]:,.0f}" if ci[1] >= 100 else f"{ci[1]:.3g}"
                ax.text(x, limit * 0.985, f"↑{end}", ha="center", va="top", fontsize=6)
            note = notes.get((variant, group))
            if note:
                y = min(ci[1] if ci else value, limit * 0.7) + top * 0.02
                if upright:
                    note = note.replace("\n", "  ")
                ax.text(
                    x, y, note, ha="center", va="bottom", fontsize=7, rotation=90 if upright else 0
                )
        ax.bar(
            xs,
            ys,
            width * 0.95,
            color=COLOURS.get(variant, "#333333"),
            label=(labels or {}).get(variant, variant),
            yerr=[lo, hi],
            capsize=3,
            error_kw={"elinewidth": 1},
        )
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, limit)
    ax.grid(axis="y", alpha=0.3)
    if legend:  # below the axes: never over a bar or an annotation
        ax.legend(
            fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=3, frameon=False
        )


def figure_legend(fig: Any, axes: Any) -> float:
    """One legend for the whole figure, below the panels (each client once, in its colour);
    returns the fraction of the figure's height it takes."""
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if not seen:
        return 0.0
    ncols = min(len(seen), 6)
    rows = -(-len(seen) // ncols)
    height = (0.3 + 0.22 * rows) / float(fig.get_figheight())
    fig.legend(
        list(seen.values()), list(seen), loc="lower center", ncols=ncols, fontsize=8, frameon=False
    )
    return height


def scenario_figure(
    out: Path,
    runs: list[dict[str, Any]],
    metrics: Sequence[tuple[str, str]],
    name: str,
    scenarios: Sequence[str],
    *,
    per_rate: bool = False,
) -> str | None:
    """One figure with a row per ``(metric, ylabel)`` and a panel per scenario (median, whiskers,
    and per-round ratios ours / peer annotated: ``2.1×J`` = 2.1 times the Java peer's figure).

    ``per_rate``: a panel per scenario and offered rate, so that a rate whose latencies are
    orders of magnitude apart (an overloaded 10 000 msg/s) does not flatten the others.
    """
    ok = [r for r in runs if r["ok"] and not r["discarded"]]
    names = [m for m, _ in metrics]

    def panel_of(r: dict[str, Any]) -> tuple[str, int | None]:
        return r["scenario"], r.get("rate") if per_rate else None

    has = {panel_of(r) for r in ok if any(r.get(m) is not None for m in names)}
    panels = sorted(
        (p for p in has if p[0] in scenarios), key=lambda p: (scenarios.index(p[0]), p[1] or 0)
    )
    if not panels:
        return None
    plt = _pyplot()
    # A panel is as wide as its groups need (the full matrix has 9 produce groups of 4 bars, each
    # with an upright ratio note), and never narrower than the old fixed width.
    groups = [max(2, len({_group_label(r) for r in ok if panel_of(r) == p})) for p in panels]
    width = max(max(4.2, 5.2 - 0.5 * len(panels)) * len(panels), 1.3 * sum(groups))
    fig, axes = plt.subplots(
        len(metrics),
        len(panels),
        figsize=(width, 4.6 * len(metrics)),
        squeeze=False,
        gridspec_kw={"width_ratios": groups},
    )
    for row, (metric, ylabel) in enumerate(metrics):
        kept = [r for r in ok if r.get(metric) is not None]
        for ax, (scenario, rate) in zip(axes[row], panels, strict=True):
            rs = [r for r in kept if r["scenario"] == scenario]
            if per_rate:
                rs = [r for r in rs if r.get("rate") == rate]
            if not rs:
                ax.set_axis_off()
                continue
            title = _SCENARIO_TITLES.get(scenario, scenario)
            if per_rate and rate is not None:
                title += f"\n{rate:,} msg/s offered"
            _scenario_panel(ax, rs, metric, ylabel, title)
    fig.tight_layout(rect=(0, figure_legend(fig, axes), 1, 1))
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _scenario_panel(
    ax: Any, rs: list[dict[str, Any]], metric: str, ylabel: str, title: str
) -> None:
    groups = sorted(
        {_group_label(r) for r in rs},
        key=lambda g: next(
            (r["size"], r.get("window") or 0, r.get("rate") or 0)
            for r in rs
            if _group_label(r) == g
        ),
    )
    values: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rs:
        values[r["variant"]][_group_label(r)][r["round"]] = float(r[metric])
    order = sorted(values, key=lambda v: (v in ("java", "go"), v))
    series = {
        v: {g: b for g, per in values[v].items() if (b := _bar(list(per.values()))) is not None}
        for v in order
    }
    flagged = overloaded(rs)
    notes: dict[tuple[str, str], str] = {}
    for v in order:
        if v in ("java", "go"):
            continue
        for g, per in values[v].items():
            # No ratio against a peer that was overloaded: that is not a comparison.
            peers = {
                p[0].upper(): values[p][g]
                for p in ("java", "go")
                if g in values[p] and (p, g) not in flagged
            }
            notes[(v, g)] = _ratio_text(per, peers)
    bars_panel(ax, groups, series, notes, ylabel, title, legend=False, flagged=flagged)
    if flagged:
        ax.set_xlabel("hatched: runs with send errors (overloaded), not to scale", fontsize=7)


def overloaded(rs: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """``(variant, group)`` cells with errors in any of their kept runs, each with its text
    (how many runs had errors, and the most in one run): such a client was overloaded, so its
    figures are not comparisons and must not set a panel's scale."""
    errors: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in rs:
        errors[(r["variant"], _group_label(r))].append(int(r.get("errors") or 0))
    return {
        cell: f"errors in {sum(1 for e in counts if e)}/{len(counts)} runs (≤ {max(counts):,})"
        for cell, counts in errors.items()
        if any(counts)
    }


def spark_figure(out: Path, spark: dict[str, Any] | None) -> str | None:
    """Rows/s of our Spark source and sink next to PySpark's floors (read: prepared Arrow
    batches; write: a sink that drops the rows), our client alone and our producer alone."""
    runs = [r for r in (spark or {}).get("runs", []) if r.get("ok") and r.get("round", 0) > 0]
    if not runs:
        return None
    groups = {"read": "batch read", "stream": "AvailableNow\nstream", "sink": "write"}
    per: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in runs:
        case = "sink" if r["case"] == "producer" else r["case"]
        variant = "producer" if r["case"] == "producer" else r["variant"]
        per[variant][groups[case]][r["round"]] = float(r["rows_per_s"])
    series: dict[str, dict[str, Bar]] = {
        v: {g: b for g, xs in per[v].items() if (b := _bar(list(xs.values())))}
        for v in ("aio", "client", "floor", "producer")
        if v in per
    }
    notes: dict[tuple[str, str], str] = {}
    for g, base_variant, label in (
        (groups["read"], "floor", "floor"),
        (groups["read"], "client", "client"),
        (groups["stream"], "floor", "floor"),
        (groups["sink"], "producer", "producer"),
    ):
        ours = per["aio"].get(g, {})
        base = per.get(base_variant, {}).get(g, {})
        rs = [ours[r] / base[r] for r in ours if r in base]
        if rs:
            text = f"{median(rs):.2f}× {label}"
            notes[("aio", g)] = f"{notes[('aio', g)]}\n{text}" if ("aio", g) in notes else text
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.4))
    order = [g for g in groups.values() if any(g in s for s in series.values())]
    title = f"Spark local[2]: {spark['rows']:,} × {spark['size']} B (warm rounds)" if spark else ""
    names = {
        "aio": "tubemq-aio in Spark",
        "client": "our client, no Spark",
        "floor": "PySpark floor",
        "producer": "our Producer alone",
    }
    bars_panel(ax, order, series, notes, "rows/s (median)", title, names)
    ax.set_xlabel(
        "floor: read = prepared Arrow batches, write = rows dropped; Producer alone: W=256",
        fontsize=7,
    )
    fig.tight_layout()
    fig.savefig(out / "spark.png", dpi=110)
    plt.close(fig)
    return "spark.png"


def latency_cdf(out: Path, runs: list[dict[str, Any]]) -> str | None:
    """CDFs of the last kept round of every latency/e2e cell, coloured by client."""
    lat = [
        r
        for r in runs
        if r["ok"]
        and not r["discarded"]
        and r["scenario"] in ("latency", "e2e")
        and r["peer"].get("latency_cdf")
    ]
    if not lat:
        return None
    plt = _pyplot()
    last: dict[tuple[str, str, int, int | None], dict[str, Any]] = {}
    for r in lat:
        last[(r["scenario"], r["variant"], r["size"], r.get("rate"))] = r
    scenarios = sorted({k[0] for k in last})
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5.5 * len(scenarios), 4.8), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        rates = sorted({k[3] or 0 for k in last if k[0] == scenario})
        for (sc, variant, size, rate), r in sorted(last.items()):
            if sc != scenario:
                continue
            xs, ys = zip(*r["peer"]["latency_cdf"], strict=True)
            ax.plot(
                xs,
                ys,
                color=COLOURS.get(variant, "#333333"),
                linestyle=styles[rates.index(rate or 0) % len(styles)],
                label=f"{variant} {size} B {rate:,}/s",
            )
        ax.set_xscale("log")
        ax.set(
            xlabel="latency, ms (log)",
            ylabel="fraction of messages",
            title=_SCENARIO_TITLES[scenario],
        )
        ax.grid(alpha=0.3)
        ax.legend(
            fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2, frameon=False
        )
    fig.tight_layout()
    fig.savefig(out / "latency_cdf.png", dpi=110)
    plt.close(fig)
    return "latency_cdf.png"


def all_plots(out: Path, runs: list[dict[str, Any]], spark: dict[str, Any] | None) -> list[str]:
    """Write every figure that has data; [] without matplotlib."""
    try:
        _pyplot()
    except ImportError:
        return []
    makers: list[Callable[[], str | None]] = [
        lambda: scenario_figure(
            out, runs, [("msg_per_s", "msg/s (median)")], "throughput.png", ("produce", "consume")
        ),
        lambda: scenario_figure(
            out,
            runs,
            [("cpu_s_per_1e6", "client CPU-s per 10⁶ msg (median)")],
            "cpu_per_message.png",
            ("produce", "consume", "e2e"),
        ),
        lambda: scenario_figure(
            out,
            runs,
            [
                ("latency_p50_ms", "p50 latency, ms (median)"),
                ("latency_p99_ms", "p99 latency, ms (median)"),
            ],
            "latency.png",
            ("latency", "e2e"),
            per_rate=True,
        ),
        lambda: latency_cdf(out, runs),
        lambda: spark_figure(out, spark),
    ]
    return [name for make in makers if (name := make()) is not None]


def main(argv: Sequence[str] | None = None) -> int:
    """Draw a result's figures again from its ``raw.json``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m benchmarks.harness.plots")
    parser.add_argument("result", type=Path, help="a result directory (holds raw.json)")
    parser.add_argument("--out", type=Path, help="where to write the PNGs (default: result)")
    ns = parser.parse_args(argv)
    raw = json.loads((ns.result / "raw.json").read_text())
    out = ns.out or ns.result
    out.mkdir(parents=True, exist_ok=True)
    for name in all_plots(out, raw["runs"], raw.get("spark")):
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
