"""A small ``make gateway-ha-run``: three uvicorn replicas, four HTTP consumers spreading their
calls over them, one producer; one replica SIGKILLed, then the Redis primary (Sentinel
failover). Nothing produced is skipped, duplicates stay bounded, and every answer that was not
a 200 is one a client retries."""

from __future__ import annotations

import pytest

from benchmarks.gateway_ha import report
from benchmarks.gateway_ha.run import HaRunSettings, error_lines, run_ha

#: Kills Redis primaries or replicas: run by `make test`, left out of `make unit` (see Makefile).
pytestmark = pytest.mark.failover

#: What a client may see during the kills, all retriable: a replica that does not answer, a
#: 503 while Redis fails over, a 409 for an ack whose lease the failover or the dead replica's
#: expiry gave to someone else (that batch is redelivered).
RETRIABLE = {"replica down", "503 store_unavailable", "409 lease_stale"}


async def test_load_with_a_replica_and_the_redis_primary_killed_skips_nothing() -> None:
    settings = HaRunSettings(seconds=9.0, rate=100.0, lease_ms=9000, drain_timeout=60.0)
    result = await run_ha(settings)
    counts = result["counts"]
    assert counts["produced"] > 0
    assert counts["skipped"] == 0
    assert counts["delivered_unique"] == counts["produced"]
    # at most the batches leased on the dead replica and in flight at the Redis kill come back
    bound = settings.consumers * settings.max_messages * 3
    assert counts["duplicated"] <= bound, counts
    assert set(result["answers"]) <= RETRIABLE, (result["answers"], result["replica_errors"])
    assert result["answers"].get("503 store_unavailable", 0) >= 1  # the failover was seen
    assert [w["window"] for w in result["windows"]] == [
        "before replica kill",
        "during replica kill",
        "after replica kill, before Redis primary kill",
        "during Redis primary kill",
        "after Redis primary kill",
    ]
    assert "| produced |" in report.markdown(result)


def test_a_runs_record_keeps_the_errors_its_replicas_logged() -> None:
    log = "\n".join(
        [
            "INFO: 127.0.0.1 - POST /v1/groups/g/fetch 200",
            "2026-11-26 ERROR tubemq_aio.gateway HTTP 500 internal: unexpected error",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in f',
            "KeyError: 'boom'",
        ]
    )
    assert error_lines(log, limit=2) == [
        "2026-11-26 ERROR tubemq_aio.gateway HTTP 500 internal: unexpected error",
        "Traceback (most recent call last):",
    ]
    assert error_lines(log)[-1] == "KeyError: 'boom'"
    assert error_lines("INFO: all well\n") == []
