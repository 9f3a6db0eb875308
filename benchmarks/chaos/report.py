"""Turn the clients' logs and the event records into the per-event figures of a chaos run.

An event's window runs from its start to the next event's start (the last one's to the end of
the run). For each window:

- ``acked``: messages acknowledged to a producer in it;
- per consumer group, acknowledged messages never consumed, counted apart by cause from the
  brokers' data read back after the run (:mod:`benchmarks.chaos.readback`):
  - ``never_stored``: missing on the broker after the run (acknowledged from its memory cache
    and dropped by a SIGKILL before the flush: the unflushed window, docs/failures.md); of
    them ``never_stored_unexplained`` were not acked before a SIGKILL of the broker that
    took them in this window (no known cause: a fault);
  - ``lost``: stored on the broker and never consumed (a real loss: the consumers skipped
    them);
- ``duplicates``: per group, receipts of an already received body;
- ``errors``: client -> error type -> count, as raised to the application;
- ``produce_stall_s`` / ``consume_stall_s``: the longest time without an ack / a receipt;
- ``produce_back_s`` / ``consume_back_s``: from the fault's end to the first ack / receipt
  (None if there was none before the window closed).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from typing import Any

from benchmarks.chaos.events import EventRecord
from benchmarks.chaos.traffic import Ack, Traffic

__all__ = ["event_report", "summarize"]


def _max_gap(times: list[float], lo: float, hi: float) -> float:
    """Longest interval in [lo, hi] without an element of sorted ``times``."""
    i, j = bisect.bisect_left(times, lo), bisect.bisect_right(times, hi)
    points = [lo, *times[i:j], hi]
    return max(b - a for a, b in itertools.pairwise(points))


def _first_after(times: list[float], t: float, hi: float) -> float | None:
    i = bisect.bisect_left(times, t)
    return times[i] - t if i < len(times) and times[i] <= hi else None


def _lost(
    acked: dict[bytes, Ack],
    got: Counter[bytes],
    lo: float,
    hi: float,
    rec: EventRecord,
    stored: set[bytes],
) -> dict[str, Any]:
    """Acked bodies of the window never received, by cause: ``lost`` (stored, never consumed)
    and ``never_stored`` (missing on the broker; ``never_stored_unexplained`` when no SIGKILL
    of its broker after the ack explains it), with where the lost ones were stored and when
    they were acked (seconds after the event began), for a reader to tell which fault dropped
    them."""
    lost = never = unexplained = 0
    by_broker: Counter[int] = Counter()
    after_kill: Counter[int] = Counter()
    first = last = None
    for body, ack in acked.items():
        if not lo <= ack.at < hi or body in got:
            continue
        if body not in stored:
            never += 1
            if not any(ack.broker_id == b and ack.at <= at for b, at in rec.sigkilled):
                unexplained += 1
            continue
        lost += 1
        by_broker[ack.broker_id] += 1
        if any(ack.broker_id == b and ack.at > at for b, at in rec.sigkilled):
            after_kill[ack.broker_id] += 1
        rel = round(ack.at - lo, 2)
        first = rel if first is None else min(first, rel)
        last = rel if last is None else max(last, rel)
    out: dict[str, Any] = {
        "lost": lost,
        "never_stored": never,
        "never_stored_unexplained": unexplained,
    }
    if lost:
        out["lost_detail"] = {
            "by_broker": {str(b): n for b, n in sorted(by_broker.items())},
            "stored_by_a_sigkilled_broker_after_it_came_back": sum(after_kill.values()),
            "acked_between_s": [first, last],
        }
    return out


def event_report(
    traffic: Traffic, rec: EventRecord, window_end: float, stored: set[bytes]
) -> dict[str, Any]:
    """The figures of one event (see the module docstring); ``stored``: every body the
    brokers hold after the run."""
    lo, hi = rec.began, window_end
    acked = traffic.acked()
    ack_times = sorted(a.at for a in acked.values())
    out: dict[str, Any] = {
        "event": rec.name,
        "fault_seconds": round(rec.healed - rec.began, 2),
        "window_seconds": round(hi - lo, 2),
        "acked": sum(1 for a in acked.values() if lo <= a.at < hi),
        "produce_stall_s": round(_max_gap(ack_times, lo, hi), 2),
        "produce_back_s": _round(_first_after(ack_times, rec.healed, hi)),
        "notes": rec.notes,
        "sigkilled_brokers": [b for b, _ in rec.sigkilled],
    }
    for log in traffic.consumer_logs:
        times = sorted(log.times)
        out[log.group] = {
            **_lost(acked, log.counts, lo, hi, rec, stored),
            "duplicates": sum(1 for t in log.duplicate_times if lo <= t < hi),
            "consume_stall_s": round(_max_gap(times, lo, hi), 2),
            "consume_back_s": _round(_first_after(times, rec.healed, hi)),
        }
    errors: dict[str, Counter[str]] = {}
    for t, who, name in traffic.errors.items:
        if lo <= t < hi:
            errors.setdefault(who, Counter())[name] += 1
    out["errors"] = {who: dict(c) for who, c in sorted(errors.items())}
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def summarize(events: list[dict[str, Any]], traffic: Traffic, stored: set[bytes]) -> dict[str, Any]:
    """Whole-run totals: acked, ``acked_not_stored`` (acked bodies missing from ``stored``,
    also those consumed before a SIGKILL dropped them), lost and never stored per group,
    duplicates per group, untyped errors."""
    acked = traffic.acked()
    totals: dict[str, Any] = {
        "acked": len(acked),
        "send_attempts": sum(p.attempts for p in traffic.producers),
        "acked_by_producer": {p.name: len(p.acked) for p in traffic.producers},
        "acked_not_stored": sum(1 for b in acked if b not in stored),
        "untyped_errors": sorted(
            {e for _, _, e in traffic.errors.items if e.startswith("untyped:")}
        ),
    }
    for log in traffic.consumer_logs:
        totals[log.group] = {
            "received": sum(log.counts.values()),
            "lost": sum(e[log.group]["lost"] for e in events),
            "never_stored": sum(e[log.group]["never_stored"] for e in events),
            "never_stored_unexplained": sum(
                e[log.group]["never_stored_unexplained"] for e in events
            ),
            "lost_outside_events": sum(1 for b in acked if b not in log.counts)
            - sum(e[log.group]["lost"] + e[log.group]["never_stored"] for e in events),
            "duplicates": sum(c - 1 for c in log.counts.values() if c > 1),
        }
    return totals
