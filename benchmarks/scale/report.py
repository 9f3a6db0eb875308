"""The scale benchmark's ``summary.md`` tables and PNG plots of cost against size."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _table(head: Sequence[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The tables of one run, with its environment and load averages."""
    env = result["env"]
    out = [
        f"# Scale benchmark, {'quick' if result['quick'] else 'full'} run, {env['git_revision']}",
        "",
        f"{result['seconds']} s in all; {env['cpus']} CPUs ({env['cpu_model']}); load average "
        f"(1, 5, 15 min) {env['load_average_start']} before, {env['load_average_end']} after. "
        "Stand-in cluster (FakeCluster, one broker) in its own process; a fresh client process "
        "per cell; 32-byte messages. `cluster core` is the stand-in's CPU share (near 1.0 it "
        "would be the bottleneck).",
        "",
        "## Server-balanced consumer over partitions",
        "",
    ]
    out += _table(
        [
            "P",
            "CPU-s / 10⁶ msgs",
            "msgs/s",
            "positions()",
            "read all",
            "KB / partition",
            "tasks",
            "sockets",
            "assign",
            "cluster core",
        ],
        [
            [
                c["partitions"],
                c["cpu_s_per_million"],
                c["messages_per_s"],
                f"{c['positions_s'] * 1000:.2f} ms",
                f"{c['positions_read_s'] * 1000:.2f} ms",
                c["kb_per_partition"],
                c["tasks"],
                c["sockets"],
                f"{c['assign_s']:.2f} s",
                c["cluster_cpu_share"],
            ]
            for c in result["consume"]
        ],
    )
    out += ["", "## Idle consumer", ""]
    out += _table(
        [
            "P",
            "policy",
            "max rest",
            "core share",
            "fetches/s",
            "cluster core",
            "first message (median, max)",
        ],
        [
            [
                c["partitions"],
                c["policy"],
                f"{c['max_wait_s']} s",
                c["core_share"],
                c["fetches_per_s"],
                c["cluster_cpu_share"],
                f"{c['first_message_median_s']} s, {c['first_message_max_s']} s",
            ]
            for c in result["idle"]
        ],
    )
    out += ["", "## Client-balanced connect, one partition at a time", ""]
    out += _table(
        [
            "P",
            "client CPU",
            "ms CPU / connect",
            "fetches meanwhile",
            "wall",
            "positions()",
            "read all",
            "client CPU, no polling (rest)",
        ],
        [
            [
                c["partitions"],
                f"{c['cpu_s']} s",
                c["cpu_ms_per_connect"],
                c["fetches"],
                f"{c['wall_s']} s",
                f"{c['positions_s'] * 1000:.2f} ms",
                f"{c['positions_read_s'] * 1000:.2f} ms",
                f"{c['rest']['cpu_s']} s ({c['rest']['rest_s']} s)",
            ]
            for c in result["connect"]
        ],
    )
    out += ["", "## Producer over topics", ""]
    out += _table(
        ["topics", "CPU-s / 10⁶ msgs", "msgs/s"],
        [[c["topics"], c["cpu_s_per_million"], c["messages_per_s"]] for c in result["produce"]],
    )
    out += ["", "## A group of N members on one topic", ""]
    out += _table(
        ["N", "P", "split", "shares (min, max)", "master req/s idle", "take-over after a leave"],
        [
            [
                c["members"],
                c["partitions"],
                f"{c['split_s']} s",
                c["shares"],
                c["idle_master_requests_per_s"],
                f"{c['reassign_s']} s",
            ]
            for c in result["group"]
        ],
    )
    return "\n".join(out)


def _pyplot() -> Any:
    mpl = importlib.import_module("matplotlib")
    mpl.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _line(
    out: Path, name: str, xs: list[float], ys: list[float], xlabel: str, ylabel: str, title: str
) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    plt.close(fig)
    return name


def plot(result: dict[str, Any], out: Path) -> list[str]:
    """Write the plots of cost against size; their file names ([] without matplotlib)."""
    try:
        _pyplot()
    except ImportError:
        return []
    made = []
    consume = result["consume"]
    if consume:
        ps = [float(c["partitions"]) for c in consume]
        made.append(
            _line(
                out,
                "consume_cpu.png",
                xs=ps,
                ys=[c["cpu_s_per_million"] for c in consume],
                xlabel="partitions held",
                ylabel="client CPU-s per 10⁶ messages",
                title="Consumer CPU per message",
            )
        )
        made.append(
            _line(
                out,
                "consume_positions.png",
                xs=ps,
                ys=[c["positions_s"] * 1000 for c in consume],
                xlabel="partitions held",
                ylabel="positions() ms",
                title="positions() time",
            )
        )
        made.append(
            _line(
                out,
                "consume_memory.png",
                xs=ps,
                ys=[c["rss_kb_held"] / 1024 for c in consume],
                xlabel="partitions held",
                ylabel="RSS growth (MB)",
                title="Consumer memory",
            )
        )
    connect = result["connect"]
    if connect:
        made.append(
            _line(
                out,
                "connect_cpu.png",
                xs=[float(c["partitions"]) for c in connect],
                ys=[c["cpu_ms_per_connect"] for c in connect],
                xlabel="partitions connected",
                ylabel="client CPU ms per connect()",
                title="Client-balanced connect, one by one",
            )
        )
    produce = result["produce"]
    if produce:
        made.append(
            _line(
                out,
                "produce_cpu.png",
                xs=[float(c["topics"]) for c in produce],
                ys=[c["cpu_s_per_million"] for c in produce],
                xlabel="topics",
                ylabel="client CPU-s per 10⁶ messages",
                title="Producer over topics",
            )
        )
    return made
