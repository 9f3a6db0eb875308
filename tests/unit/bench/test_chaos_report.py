"""The chaos report counts acknowledged messages never consumed apart by cause, from the
brokers' data read back after the run: never stored (the unflushed window a SIGKILL drops)
and stored but never consumed (a real loss)."""

from __future__ import annotations

from benchmarks.chaos.events import EventRecord
from benchmarks.chaos.report import event_report, summarize
from benchmarks.chaos.traffic import Ack, Traffic, TrafficPlan


def _traffic() -> Traffic:
    traffic = Traffic(TrafficPlan("127.0.0.1:1", "t"), uvloop_producer=False)
    acked = traffic.producers[0].acked
    acked[b"a-early"] = Ack(at=10.0, broker_id=1)  # before the kill of broker 1
    acked[b"a-flushed"] = Ack(at=11.0, broker_id=1)  # before the kill, but flushed
    acked[b"a-after"] = Ack(at=13.0, broker_id=1)  # after the broker came back
    acked[b"b-gone"] = Ack(at=11.5, broker_id=2)  # broker 2 was not killed
    acked[b"b-read"] = Ack(at=11.5, broker_id=2)
    acked[b"outside"] = Ack(at=30.0, broker_id=2)  # after the window
    for log in traffic.consumer_logs:
        log.record(b"b-read", 12.0)
        log.record(b"b-read", 12.5)  # a duplicate
    return traffic


def test_unconsumed_messages_are_counted_by_cause() -> None:
    traffic = _traffic()
    rec = EventRecord("rolling_restart", began=9.0, healed=12.5, sigkilled=[(1, 12.0)])
    stored = {b"a-flushed", b"a-after", b"b-read", b"outside"}
    ev = event_report(traffic, rec, 20.0, stored)
    for log in traffic.consumer_logs:
        group = ev[log.group]
        assert group["never_stored"] == 2  # a-early (the SIGKILL's window) and b-gone
        assert group["never_stored_unexplained"] == 1  # b-gone: its broker was not killed
        assert group["lost"] == 2  # a-flushed and a-after: stored, never consumed
        assert group["lost_detail"]["stored_by_a_sigkilled_broker_after_it_came_back"] == 1
        assert group["lost_detail"]["by_broker"] == {"1": 2}
        assert group["duplicates"] == 1
    totals = summarize([ev], traffic, stored)
    assert totals["acked"] == 6
    assert totals["acked_not_stored"] == 2
    for log in traffic.consumer_logs:
        t = totals[log.group]
        assert (t["lost"], t["never_stored"], t["never_stored_unexplained"]) == (2, 2, 1)
        assert t["lost_outside_events"] == 1  # "outside": acked after the last window
        assert t["duplicates"] == 1


def test_everything_consumed_counts_nothing() -> None:
    traffic = _traffic()
    for log in traffic.consumer_logs:
        for body in traffic.acked():
            log.record(body, 15.0)
    rec = EventRecord("network_cut", began=9.0, healed=12.5)
    ev = event_report(traffic, rec, 40.0, set())  # nothing stored: nothing unconsumed anyway
    for log in traffic.consumer_logs:
        assert (ev[log.group]["lost"], ev[log.group]["never_stored"]) == (0, 0)
        assert "lost_detail" not in ev[log.group]
