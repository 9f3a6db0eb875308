"""The scale benchmark's pieces that need no processes: the stand-in's fill, the tables, the
plots and the plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.scale import cluster, report, run
from tubemq_aio.testing import FakeCluster


def test_fill_spreads_messages_evenly_over_the_partitions() -> None:
    fake = FakeCluster(topics={"s": 3})
    assert cluster._fill(fake, "s", 7, 32) == 7
    logs = [fake.brokers[0].log("s", pid).partition_messages(pid) for pid in range(3)]
    assert [len(m) for m in logs] == [3, 2, 2]
    assert {len(m.payload) for log in logs for m in log} == {32}


def result() -> dict[str, Any]:
    consume = [
        {
            "partitions": p,
            "cpu_s_per_million": round(5.0 + p / 1000, 3),
            "messages_per_s": 50_000,
            "positions_s": p / 1e6,
            "positions_read_s": p / 1e5,
            "kb_per_partition": 6.0,
            "rss_kb_held": 6 * p,
            "tasks": 8,
            "sockets": 4,
            "assign_s": 0.05,
            "cluster_cpu_share": 0.2,
        }
        for p in (4, 64, 512)
    ]
    return {
        "env": {
            "git_revision": "abc1234",
            "cpus": 2,
            "cpu_model": "x",
            "load_average_start": [0.1, 0.1, 0.1],
            "load_average_end": [0.2, 0.1, 0.1],
        },
        "quick": True,
        "seconds": 37.0,
        "consume": consume,
        "idle": [
            {
                "partitions": 256,
                "policy": "backoff",
                "max_wait_s": 3.2,
                "core_share": 0.015,
                "fetches_per_s": 64.0,
                "cluster_cpu_share": 0.01,
                "first_message_median_s": 1.6,
                "first_message_max_s": 3.1,
            }
        ],
        "connect": [
            {
                "partitions": 64,
                "cpu_s": 0.01,
                "cpu_ms_per_connect": 0.2,
                "wall_s": 0.02,
                "positions_s": 0.001,
                "positions_read_s": 0.002,
                "fetches": 70,
                "rest": {"cpu_s": 0.006, "rest_s": 60.0},
            }
        ],
        "produce": [{"topics": 16, "cpu_s_per_million": 20.0, "messages_per_s": 40_000}],
        "group": [
            {
                "members": 2,
                "partitions": 256,
                "split_s": 0.05,
                "shares": [128, 128],
                "idle_master_requests_per_s": 2.0,
                "reassign_s": 1.0,
            }
        ],
    }


def test_summary_has_a_row_per_cell_and_the_load_averages() -> None:
    text = report.markdown(result())
    assert "[0.1, 0.1, 0.1] before, [0.2, 0.1, 0.1] after" in text
    assert "| 512 | 5.512 | 50000 | 0.51 ms | 5.12 ms | 6.0 | 8 | 4 | 0.05 s | 0.2 |" in text
    assert "| 256 | backoff | 3.2 s | 0.015 | 64.0 | 0.01 | 1.6 s, 3.1 s |" in text
    assert "| 64 | 0.01 s | 0.2 | 70 | 0.02 s | 1.00 ms | 2.00 ms | 0.006 s (60.0 s) |" in text
    assert "| 2 | 256 | 0.05 s | [128, 128] | 2.0 | 1.0 s |" in text


def test_plots_are_written(tmp_path: Path) -> None:
    made = report.plot(result(), tmp_path)
    assert set(made) == {
        "consume_cpu.png",
        "consume_positions.png",
        "consume_memory.png",
        "connect_cpu.png",
        "produce_cpu.png",
    }
    assert all((tmp_path / name).stat().st_size > 1000 for name in made)


def test_full_plan_covers_the_issue_sizes_and_quick_is_smaller() -> None:
    full, quick = run.Plan(), run.QUICK
    assert full.partitions == (4, 64, 512, 2048, 8192)
    assert full.idle_partitions == 2048
    assert full.group_partitions == 256
    assert max(quick.partitions) < max(full.partitions)
    assert quick.idle_seconds + quick.idle_warmup < full.idle_seconds + full.idle_warmup
