"""The fetch timeline's arithmetic: stages cut from one fetch's stamps, partition cycles."""

from __future__ import annotations

from typing import Any

from benchmarks.micro.gateway_timeline import _breakdown, _partitions


def _fetch(t: float, p: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A client row and a server record of one fetch beginning at ``t`` (seconds)."""
    row = {"send": t, "answered": t + 0.030, "parsed": t + 0.032, "n": 1000, "status": "ok"}
    rec = {
        "in": t + 0.001,
        "body": t + 0.0012,
        "head": t + 0.027,
        "sent": t + 0.028,
        "bytes": 200_000,
        "stages": [
            ["engine", t + 0.002, t + 0.026],
            ["acquire", t + 0.002, t + 0.006],
            ["get_message", t + 0.006, t + 0.016, "plain"],
            ["get_message_wire", t + 0.006, t + 0.015],
            ["commit", t + 0.0065, t + 0.017, "consumed"],
            ["booking", t + 0.017, t + 0.021, p],
            ["json_messages", t + 0.0262, t + 0.0265],
        ],
    }
    return row, rec


def test_stages_are_cut_from_one_fetch() -> None:
    (row, rec), (following, _) = _fetch(0.0, "p0"), _fetch(0.0325, "p0")
    out = _breakdown([(row, rec, following)])
    ms = {k: v["median"] for k, v in out.items()}
    assert ms["1_client_write_to_asgi"] == 1.0
    assert ms["redis_acquire"] == 4.0
    assert ms["broker_get_message"] == 10.0
    assert ms["broker_get_message_wire"] == 9.0
    assert ms["broker_commit"] == 10.5
    assert ms["redis_booking"] == 4.0
    assert ms["engine_total"] == 24.0
    # the commit rode behind the GetMessage: the broker kept the fetch waiting 6 -> 17 ms
    assert ms["broker_wait"] == 11.0
    # the engine's time outside the timed calls: 24 less what 2 -> 21 ms covered
    assert ms["engine_other"] == 5.0
    assert ms["6_server_sent_to_client_read"] == 2.0
    assert ms["7_client_parse"] == 2.0
    assert ms["8_client_idle_to_next_send"] == 0.5
    assert ms["messages"] == 1000.0


def test_a_fetch_without_a_batch_is_left_out() -> None:
    row, rec = _fetch(0.0, "p0")
    row["status"] = "busy"
    assert _breakdown([(row, rec, None)]) == {}


def test_partition_cycles_run_from_acquire_to_acquire() -> None:
    recs = [_fetch(t, "p0")[1] for t in (0.0, 0.040, 0.080)] + [_fetch(0.01, "p1")[1]]
    out = _partitions(recs)
    assert out["p0"]["fetches"] == 3
    assert out["p0"]["cycle_ms_median"] == 40.0
    assert out["p0"]["answer_sent_to_next_acquire_ms_median"] == 14.0
    assert out["p1"] == {
        "fetches": 1,
        "cycle_ms_median": None,
        "answer_sent_to_next_acquire_ms_median": None,
    }
