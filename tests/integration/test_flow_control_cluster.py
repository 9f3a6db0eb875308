"""Flow control on the real cluster: the master's rules and the broker's 452 pace the consumer.

Two rules are set through the master web API (parameter ``statusId``; the documented
``StatusId`` would store them disabled):

* a **cluster default** data-limit rule (type 0): while a consumer's data lag (``currDataDlt``,
  raw bytes compared with ``dltInM``) is above 100 000, it may read 1 MiB per minute, i.e.
  1 MiB/12 per 5 s slice; past that the **broker** answers 452 with ``minLimitTime`` = the
  rule's ``freqInMs``. The broker only limits from a consumer's second read of a partition on,
  and its lag counts data in message *files*, so the group reads files only
  (``qryPriorityId=101``) and enough data is written that one read cannot take it all;
* a **group** frequency rule (type 1): after 1 empty fetch (404) wait ``freqInMs``.

The consumer's counters must show exactly what the servers told it: every 452 rested
``minLimitTime``, every 404 rested the group rule's wait. Both rules are removed afterwards
(brokers pick that up with their next heartbeat, every 2 s on the test cluster).
"""

from __future__ import annotations

import asyncio
import json
import time

from tubemq_aio import Producer
from tubemq_aio.consumer import Consumer
from tubemq_aio.protocol.flow_control import MB
from tubemq_aio.testing import LocalCluster, WebApiError

LIMIT_FREQ_MS = 600  # default rule: wait after the slice's quota is used (= broker minLimitTime)
ZERO_FREQ_MS = 900  # group rule: wait after an empty fetch (instead of msg_not_found_wait)
COUNT = 2400  # 400 messages of ~1 KB per partition: more than one read of a partition
BODY = 1000
SLICE_BYTES = MB // 12  # what the broker lets a partition read per 5 s slice at 1 MiB/min
LIMIT_PERIOD = 50.0  # seconds; the broker re-evaluates a consumer's limit every 60 s


async def set_default_rule(cluster: LocalCluster, rules: list[dict[str, object]]) -> None:
    """Set the cluster default flow-control rule (an unchanged rule is no error)."""
    try:
        await cluster.web_api.call(
            "admin_set_def_flow_control_rule",
            modify=True,
            flowCtrlInfo=json.dumps(rules),
            statusId=1,
        )
    except WebApiError as exc:
        if "not changed" not in str(exc):
            raise


async def test_broker_452_and_master_rules_pace_the_consumer(
    cluster: LocalCluster, topic: str
) -> None:
    """452 answers rest exactly ``minLimitTime``; 404s rest the group rule's wait; batches after
    a partition's first read stay within the broker's per-slice quota; nothing is lost."""
    group = f"gfc_{topic}"
    default_rule = [
        {
            "type": 0,
            "rule": [
                {
                    "start": "00:00",
                    "end": "23:59",
                    "dltInM": 100000,
                    "limitInM": 1,
                    "freqInMs": LIMIT_FREQ_MS,
                }
            ],
        }
    ]
    group_rule = [{"type": 1, "rule": [{"zeroCnt": 1, "freqInMs": ZERO_FREQ_MS}]}]
    await cluster.web_api.call(
        "admin_set_group_flow_control_rule",
        modify=True,
        groupName=group,
        flowCtrlInfo=json.dumps(group_rule),
        statusId=1,
        qryPriorityId=101,  # read message files only: the broker's lag is file data
    )
    await set_default_rule(cluster, default_rule)
    try:
        async with Producer(cluster.master_addr, topics=[topic]) as producer:
            filler = b"x" * BODY
            results = await asyncio.gather(
                *(producer.send(topic, filler + b"%06d" % i) for i in range(COUNT))
            )
        assert len(results) == COUNT
        consumer = Consumer(
            cluster.master_addr,
            group=group,
            topics=[topic],
            consume_from="earliest",
            heartbeat_interval=2,
        )
        got: dict[int, int] = {}
        batches: dict[str, list[int]] = {}  # partition -> body bytes of each batch
        taken_at: dict[str, list[float]] = {}  # partition -> monotonic time of each batch
        async with consumer:
            t0 = time.monotonic()
            while len(got) < COUNT:
                assert time.monotonic() - t0 < 150, (len(got), consumer.stats.snapshot())
                async with await consumer.getmany(timeout=0.5) as batch:
                    for msg in batch:
                        n = int(msg.body[BODY:])
                        got[n] = got.get(n, 0) + 1
                    if batch:
                        batches.setdefault(batch.partition_key, []).append(
                            sum(len(m.body) for m in batch)
                        )
                        taken_at.setdefault(batch.partition_key, []).append(time.monotonic())
            elapsed = time.monotonic() - t0
            stats = consumer.stats.snapshot()
            session = consumer._session
            assert session is not None
            flow = session.flow
    finally:
        await cluster.web_api.call("admin_rmv_def_flow_control_rule", modify=True)
        await cluster.web_api.call(
            "admin_rmv_group_flow_control_rule", modify=True, groupName=group
        )
    await asyncio.sleep(3)  # brokers take the removal with their next heartbeat (every 2 s)

    assert sorted(got) == list(range(COUNT))
    assert set(got.values()) == {1}
    # What the master told the consumer.
    assert flow.default.check_id >= 0
    assert flow.group.check_id >= 0
    (limit,) = flow.default.rules.data_limits
    assert (limit.dlt_in_m, limit.limit_bytes, limit.freq_ms) == (100000, MB, LIMIT_FREQ_MS)
    assert [(r.zero_cnt, r.freq_ms) for r in flow.group.rules.freq_limits] == [(1, ZERO_FREQ_MS)]
    assert flow.qry_priority_id == 101
    # What the broker told it, and the rests applied for it.
    assert stats["speed_limited"] > 0, stats
    assert stats["speed_limit_wait_ms"] == stats["speed_limited"] * LIMIT_FREQ_MS
    assert stats["not_found"] > 0, stats
    assert stats["not_found_wait_ms"] == stats["not_found"] * ZERO_FREQ_MS
    # A partition is fetched again only after its rest: at most one 452 per rest per partition.
    partitions = len(batches)
    assert partitions == 6
    assert stats["speed_limited"] <= partitions * (elapsed * 1000 / LIMIT_FREQ_MS + 1)
    # After a partition's first read, the broker hands out at most one slice quota per read
    # (plus the message that crossed it) — within the 60 s for which it fixed the limit at the
    # second read (later it re-evaluates the lag, which may have dropped below dltInM).
    later = [
        size
        for key, sizes in batches.items()
        for size, at in zip(sizes[1:], taken_at[key][1:], strict=True)
        if at - taken_at[key][1] < LIMIT_PERIOD
    ]
    assert later
    assert max(later) <= SLICE_BYTES + BODY + 6, batches
    print(
        f"\n{COUNT} messages in {elapsed:.1f}s; 452 answers {stats['speed_limited']} "
        f"(rested {stats['speed_limit_wait_ms']} ms), 404 answers {stats['not_found']} "
        f"(rested {stats['not_found_wait_ms']} ms); batch bytes per partition {batches}"
    )
