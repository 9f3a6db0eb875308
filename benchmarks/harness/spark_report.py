"""The Spark rows of a result: per-round ratios against PySpark's floors, our client alone and
our producer alone, and the CPU per row of each side.

Input is the ``spark`` entry of ``raw.json`` (see :mod:`~benchmarks.harness.spark_worker`):
one record per run with ``round``, ``case`` (``read``, ``stream``, ``sink``, ``producer``),
``variant`` (``aio``, ``floor`` or ``client``), ``rows``, ``seconds``, ``rows_per_s``,
``cpu_seconds`` and ``server_cpu_seconds``. Round 0 is the
session's cold first run of each case: reported on its own, left out of the warm figures.
"""

from __future__ import annotations

from typing import Any

from benchmarks.harness.stats import bootstrap_ci, median

#: (case, variant) of the measured side, (case, variant) of the baseline, what the ratio means
COMPARISONS = (
    ("read", "aio", "read", "floor", "batch read: ours / PySpark floor"),
    ("read", "aio", "read", "client", "batch read: ours / our client alone, no Spark"),
    ("read", "client", "read", "floor", "our client alone, no Spark / PySpark floor"),
    ("stream", "aio", "stream", "floor", "AvailableNow stream: ours / PySpark floor"),
    ("sink", "aio", "producer", "aio", "sink / our producer alone"),
    ("sink", "floor", "producer", "aio", "sink floor (Spark drops the rows) / our producer alone"),
    ("sink", "aio", "sink", "floor", "sink / sink floor"),
)


def _ok(runs: list[dict[str, Any]], case: str, variant: str) -> list[dict[str, Any]]:
    return [
        r
        for r in runs
        if r.get("case") == case
        and r.get("variant") == variant
        and r.get("ok")
        and r.get("rows_per_s")
    ]


def _by_round(runs: list[dict[str, Any]], case: str, variant: str) -> dict[int, float]:
    return {int(r["round"]): float(r["rows_per_s"]) for r in _ok(runs, case, variant)}


def _per_million(runs: list[dict[str, Any]], field: str) -> float | None:
    """Warm median of ``field`` (CPU seconds) per 10⁶ rows; None when no run has it."""
    values = [
        float(r[field]) / r["rows"] * 1e6
        for r in runs
        if int(r["round"]) > 0 and r.get(field) is not None and r.get("rows")
    ]
    return median(values) if values else None


def analyse_spark(spark: dict[str, Any]) -> dict[str, Any]:
    """Cold and warm medians per (case, variant), and per-round ratios with a 95 % interval."""
    runs = spark.get("runs") or []
    pairs = sorted({(r["case"], r["variant"]) for r in runs if r.get("case") != "check"})
    absolute = []
    for case, variant in pairs:
        per = _by_round(runs, case, variant)
        warm = [v for rnd, v in per.items() if rnd > 0]
        ok = _ok(runs, case, variant)
        absolute.append(
            {
                "case": case,
                "variant": variant,
                "cold": per.get(0),
                "warm": median(warm),
                "warm_ci95": bootstrap_ci(warm),
                "n": len(warm),
                "cpu_per_1e6": _per_million(ok, "cpu_seconds"),
                "server_cpu_per_1e6": _per_million(ok, "server_cpu_seconds"),
            }
        )
    ratios = []
    for ours, variant, base_case, base_variant, label in COMPARISONS:
        a, b = _by_round(runs, ours, variant), _by_round(runs, base_case, base_variant)
        both = sorted(set(a) & set(b))
        warm = [a[r] / b[r] for r in both if r > 0]
        if not both:
            continue
        cold = a[0] / b[0] if 0 in both else None
        ratios.append(
            {
                "label": label,
                "case": ours,
                "variant": variant,
                "baseline": f"{base_case}/{base_variant}",
                "cold": cold,
                "warm": median(warm),
                "warm_ci95": bootstrap_ci(warm),
                "n": len(warm),
                "rounds": [round(x, 3) for x in warm],
            }
        )
    check = [r["rows"] for r in runs if r.get("case") == "check"]
    failed = [r for r in runs if r.get("case") != "check" and not r.get("ok")]
    return {
        "absolute": absolute,
        "ratios": ratios,
        "check_rows": check[0] if check else None,
        "failed_runs": len(failed),
    }


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "–" if x is None else format(x, fmt)


def _ci(value: float | None, ci: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.2f}"


def spark_markdown(spark: dict[str, Any] | None) -> list[str]:
    """The Spark section of ``summary.md`` ([] when the scenario did not run)."""
    if not spark:
        return []
    s = spark.get("analysis") or analyse_spark(spark)
    lines = [
        "",
        "## Spark (local[2], one session; rows/s)",
        "",
        f"{spark['rows']:,} × {spark['size']} B on {spark['partitions']} partitions, "
        f"`noop` write for reads; the sink writes the same number of cached rows. Round 0 is the "
        f"session's cold first run; warm = median of the later rounds. Rows read back by an "
        f"untimed count: {s['check_rows']}; failed runs: {s['failed_runs']}; "
        f"took {spark.get('seconds')} s.",
        "",
        "| ratio | n | warm [95 % CI] | cold (round 0) | per round |",
        "|---|---|---|---|---|",
    ]
    for r in s["ratios"]:
        rounds = ", ".join(f"{x:.2f}" for x in r["rounds"])
        lines.append(
            f"| {r['label']} | {r['n']} | {_ci(r['warm'], r['warm_ci95'])} | "
            f"{_num(r['cold'], '.2f')} | {rounds} |"
        )
    lines += [
        "",
        "CPU-s per 10⁶ rows, warm medians: *client side* is Spark's process tree (driver, JVM, "
        "Python workers with our client in them) for Spark runs, the child process for "
        "`read`/`client` (our client alone) and `producer`; *cluster* is the master's and the "
        "brokers'.",
        "",
        "| case | variant | n | warm rows/s | cold rows/s | client side CPU-s / 10⁶ rows "
        "| cluster CPU-s / 10⁶ rows |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in s["absolute"]:
        lines.append(
            f"| {a['case']} | {a['variant']} | {a['n']} | {_num(a['warm'])} | {_num(a['cold'])} "
            f"| {_num(a.get('cpu_per_1e6'), '.1f')} | {_num(a.get('server_cpu_per_1e6'), '.1f')} |"
        )
    return lines
