"""The fidelity scenarios: what a user observes, run the same way on ``FakeCluster``
(``tests/fake/test_fake_fidelity.py``) and on the real ``LocalCluster``
(``tests/integration/test_fidelity.py``).

Each scenario takes a :class:`Target` (a cluster plus what differs in how to drive it) and
asserts the observations, so the fake and the real cluster answer the same assertions. Timing
assertions are expressed in the target's own timeouts (a fake test runs with shorter ones);
everything else is compared as is. Where the fake cannot match, ``docs/testing.md`` says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tubemq_aio import ClientBalancedConsumer, Consumer, Producer, RequestNotSentError
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._cb_models import parse_key
from tubemq_aio.consumer._cb_ops import resolve_partition
from tubemq_aio.consumer.config import ConsumeFrom
from tubemq_aio.protocol.consumer_meta import Partition
from tubemq_aio.protocol.consumer_replies import OffsetResponse
from tubemq_aio.protocol.tail_check import DEFAULT_LOST_TAIL_WINDOW
from tubemq_aio.testing import wait_until

__all__ = [
    "Target",
    "broker_restarted",
    "commits_refused",
    "consume_from_cases",
    "fetch_beyond_end",
    "filters",
    "fresh_member_after_lost_tail",
    "fresh_member_after_refilled_tail",
    "member_killed",
    "offsets_and_lag",
]

INDEX_UNIT = 28  # bytes of one index record of a broker store
MEMBER_SCRIPT = Path(__file__).parents[1] / "integration" / "scripts" / "_group_member.py"
HEARTBEAT = 2.0  # the member script's heartbeat interval; the survivor uses the same


@dataclass(frozen=True, slots=True)
class Target:
    """A cluster as the scenarios drive it.

    Attributes:
        master_addr: ``host:port`` of the master.
        brokers: brokers of the cluster (ids 1..n).
        partitions: partitions of each topic per broker, in one store (scenarios are handed
            topics of their own with this layout).
        restart_broker: kill broker ``id`` (its clients see the connection die) and start it
            again; returns once it serves.
        crash_broker: kill broker ``id`` with SIGKILL before it flushed the messages of a
            topic created less than 20 s ago and before it wrote the group offsets committed
            in the last moment (the fake loses every message of its stores and the offsets
            committed in the last ``offsets_persisted / 2`` s) and start it again; returns
            once it serves.
        offsets_persisted: seconds after which a broker has written a group's committed
            offsets where a SIGKILL leaves them (the real broker: 5 s to its offset file
            store, then a file write every 6 s; docs/testing.md).
        registration_timeout: seconds a broker keeps a silent consumer's partitions.
        balance_period: seconds between the master's balance cycles.
        name: ``"fake"`` or ``"real"`` (in messages only).
        quiet_period: seconds a scenario watches a member for messages it must not get
            (default 10; the fake, which delivers within one fetch round, passes less).
    """

    master_addr: str
    brokers: int
    partitions: int
    restart_broker: Callable[[int], Awaitable[None]]
    crash_broker: Callable[[int], Awaitable[None]]
    offsets_persisted: float
    registration_timeout: float
    balance_period: float
    name: str
    quiet_period: float = 10.0


def _store(key: str) -> str:
    return key.split(":")[0]


async def _send(target: Target, topic: str, bodies: list[bytes], **kw: str) -> list[str]:
    """Send ``bodies`` in order; return the partition key of each."""
    keys: list[str] = []
    async with Producer(target.master_addr, topics=[topic]) as producer:
        for body in bodies:
            result = await producer.send(topic, body, timeout=30, **kw)  # type: ignore[arg-type]
            keys.append(result.partition_key)
    return keys


async def _drain(
    consumer: Consumer | ClientBalancedConsumer, want: int, timeout: float
) -> list[bytes]:
    """Bodies of batches (acked) until ``want`` arrived; then 1 s more for extras."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"{len(got)} of {want} within {timeout} s"
        batch = await consumer.getmany(timeout=0.5)
        got.extend(m.body for m in batch)
        if batch:
            await batch.ack()
    extra = await consumer.getmany(timeout=1.0)
    got.extend(m.body for m in extra)
    return got


async def _drain_until(
    consumer: Consumer | ClientBalancedConsumer, wanted: set[bytes], timeout: float
) -> list[bytes]:
    """Bodies of batches (acked) until every one of ``wanted`` arrived or ``timeout`` (s) passed;
    the caller asserts on what is still missing."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while not wanted <= set(got) and time.monotonic() < deadline:
        batch = await consumer.getmany(timeout=0.5)
        got.extend(m.body for m in batch)
        if batch:
            await batch.ack()
    return got


def _recv_lines(text: str) -> list[str]:
    """The complete ``recv`` records of a group member's record file (a line a kill cut short
    is left out)."""
    lines = text.splitlines(keepends=True)
    return [line for line in lines if line.endswith("\n") and '"e": "recv"' in line]


def _group(target: Target, name: str) -> str:
    return f"fid_{target.name}_{name}_{int(time.time() * 1000) % 10**8}"


async def offsets_and_lag(target: Target, topic: str) -> None:
    """Append offsets after produce, the bounds and lag a consumer sees, and lag after reading.

    The partitions of a broker store share one index: each broker's append offsets are
    ``0, 28, 56, ...`` in send order whatever the partition; every partition of the store reports
    the store's end as its ``max_offset``, and a consumer starting at the earliest offset of any
    of them lags by the store's message count.
    """
    bodies = [f"o-{i}".encode() for i in range(12 * target.brokers)]
    async with Producer(target.master_addr, topics=[topic]) as producer:
        results = [await producer.send(topic, b, timeout=30) for b in bodies]
    per_store: dict[str, list[int]] = {}
    for r in results:
        per_store.setdefault(_store(r.partition_key), []).append(r.append_offset)
    for store, offsets in per_store.items():
        assert offsets == [INDEX_UNIT * i for i in range(len(offsets))], (store, offsets)
    group = _group(target, "lag")
    async with ClientBalancedConsumer(
        target.master_addr, group=group, topics=[topic], consume_from="earliest"
    ) as consumer:
        metas = await consumer.partitions()
        assert len(metas) == target.brokers * target.partitions
        for meta in metas:
            key = meta.partition_key
            low, high = await consumer.offset_bounds(key)
            count = len(per_store.get(_store(key), []))
            assert (low, high) == (0, INDEX_UNIT * count), (key, low, high)
            position = await consumer.connect(key)
            assert (position.current_offset, position.lag) == (0, count), (key, position)
        got = await _drain(consumer, len(bodies), 30)
        assert Counter(got) == Counter(bodies)

        async def all_at_end() -> bool:
            assert not await consumer.getmany(timeout=0.3)  # nothing more to deliver
            return all(p.at_end for p in consumer.positions().values())

        await wait_until(all_at_end, 30, "every partition read to its end")
        for key, pos in consumer.positions().items():
            assert pos.max_offset == INDEX_UNIT * len(per_store[_store(key)]), (key, pos)


async def filters(target: Target, topic: str) -> None:
    """A server-balanced consumer filtering on ``msgType`` gets exactly the matching messages."""
    bodies = [f"f-{i}".encode() for i in range(24)]
    kinds = ["keep" if i % 3 == 0 else "drop" for i in range(len(bodies))]
    async with Producer(target.master_addr, topics=[topic]) as producer:
        for body, kind in zip(bodies, kinds, strict=True):
            await producer.send(topic, body, msg_type=kind, timeout=30)
    wanted = [b for b, k in zip(bodies, kinds, strict=True) if k == "keep"]
    async with Consumer(
        target.master_addr,
        group=_group(target, "flt"),
        topics={topic: {"keep"}},
        consume_from="earliest",
        heartbeat_interval=HEARTBEAT,
    ) as consumer:
        got = await _drain(consumer, len(wanted), 60)
    assert Counter(got) == Counter(wanted)


async def consume_from_cases(target: Target, topic: str) -> None:
    """``earliest`` reads what was there; ``latest`` only what came after it got its partitions;
    a group that committed continues after its commit whatever ``consume_from`` says."""
    old = [f"c-old-{i}".encode() for i in range(8)]
    await _send(target, topic, old)
    total = target.brokers * target.partitions

    def member(group: str, consume_from: ConsumeFrom) -> Consumer:
        return Consumer(
            target.master_addr,
            group=group,
            topics=[topic],
            consume_from=consume_from,
            heartbeat_interval=HEARTBEAT,
        )

    early, late = _group(target, "early"), _group(target, "late")
    async with member(early, "earliest") as a, member(late, "latest") as b:
        await wait_until(lambda: len(a.assignment()) == len(b.assignment()) == total, 60, "both")
        assert Counter(await _drain(a, len(old), 60)) == Counter(old)
        new = [f"c-new-{i}".encode() for i in range(8)]
        await _send(target, topic, new)
        assert Counter(await _drain(b, len(new), 60)) == Counter(new)  # no old ones
        assert Counter(await _drain(a, len(new), 60)) == Counter(new)
    more = [f"c-more-{i}".encode() for i in range(4)]
    await _send(target, topic, more)
    async with member(early, "latest") as again:  # committed offsets win over consume_from
        assert Counter(await _drain(again, len(more), 60)) == Counter(more)


async def broker_restarted(target: Target, topic: str) -> None:
    """A broker killed and started again: the producer and a consumer carry on and every
    message sent after the restart is consumed; messages of the restarted broker may come again
    (a real broker's committed offsets and the messages not yet flushed to its files die with
    it; FakeCluster keeps both, see docs/testing.md)."""
    before = [f"r-a-{i}".encode() for i in range(10)]
    after = [f"r-b-{i}".encode() for i in range(10)]
    total = target.brokers * target.partitions
    async with (
        Producer(target.master_addr, topics=[topic]) as producer,
        Consumer(
            target.master_addr,
            group=_group(target, "rst"),
            topics=[topic],
            consume_from="earliest",
            heartbeat_interval=HEARTBEAT,
        ) as consumer,
    ):
        await wait_until(lambda: len(consumer.assignment()) == total, 60, "all partitions")
        first = [await producer.send(topic, b, timeout=30) for b in before]
        got = await _drain(consumer, len(before), 60)
        last = str(target.brokers)
        await target.restart_broker(target.brokers)
        second = [await producer.send(topic, b, timeout=60) for b in after]
        got += await _drain(consumer, len(after), 90)
    # Every message sent after the restart arrives; one sent before it may come again only if
    # it was stored on the restarted broker (its committed offset may predate the kill).
    assert set(after) <= set(got), sorted(set(after) - set(got))
    restarted = {b for b, r in zip(before, first, strict=True) if _store(r.partition_key) == last}
    again = {b for b, n in Counter(got).items() if n > 1}
    assert again <= restarted, sorted(again - restarted)
    print(
        f"[{target.name}] after the restart: {len(second)} sends stored, {len(again)} redelivered",
        file=sys.stderr,
    )


async def member_killed(target: Target, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    """A group member SIGKILLed: the survivor gets the dead member's partitions once the broker
    lets them go (about the registration timeout after the kill), answering the master's
    events on the way at a bounded rate, and loses no message."""
    bodies = [f"k-{i:06d}".encode() for i in range(30)]
    await _send(target, topic, bodies)
    group = _group(target, "kill")
    total = target.brokers * target.partitions
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl") as record:
        victim = await asyncio.create_subprocess_exec(
            sys.executable,
            str(MEMBER_SCRIPT),
            target.master_addr,
            group,
            topic,
            record.name,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with Consumer(
                target.master_addr,
                group=group,
                topics=[topic],
                consume_from="earliest",
                heartbeat_interval=HEARTBEAT,
            ) as survivor:
                seen: list[bytes] = []

                async def split() -> bool:
                    batch = await survivor.getmany(timeout=0.2)
                    seen.extend(m.body for m in batch)
                    if batch:
                        await batch.ack()
                    record.seek(0)
                    theirs = _victim_held(record.read())
                    mine = set(survivor.assignment())
                    return bool(mine) and bool(theirs) and len(mine | theirs) == total

                await wait_until(split, 90, "the group split over both members")
                with caplog.at_level(logging.INFO, logger="tubemq_aio.consumer"):
                    caplog.clear()
                    victim.kill()
                    await victim.wait()
                    killed = time.monotonic()

                    async def all_mine() -> bool:
                        batch = await survivor.getmany(timeout=0.2)
                        seen.extend(m.body for m in batch)
                        if batch:
                            await batch.ack()
                        return len(survivor.assignment()) == total

                    limit = target.registration_timeout + 3 * target.balance_period + 15
                    await wait_until(all_mine, limit, "the takeover")
                    took = time.monotonic() - killed
                    events = sum("rebalance event" in r.getMessage() for r in caplog.records)
                    # The dead member's partitions may still hold messages it never took: read
                    # on until every message is accounted for (one batch is one partition's).
                    record.seek(0)
                    theirs_got = _victim_bodies(_recv_lines(record.read()), bodies)
                    seen += await _drain_until(survivor, set(bodies) - theirs_got - set(seen), 30)
        finally:
            if victim.returncode is None:
                victim.kill()
                await victim.wait()
        record.seek(0)
        victim_got = _recv_lines(record.read())
    # The broker held the dead member's partitions until its registration timeout (counted from
    # the member's last contact, at most one heartbeat before the kill).
    assert took >= target.registration_timeout - HEARTBEAT - 1.0, took
    # The master offered them about once per balance cycle; the client's own bound holds anyway.
    assert events <= took / 0.5 + 2, (events, took)
    # Nothing was lost: every message reached one member or the other (a batch the victim took
    # and never acked is delivered again to the survivor).
    lost = set(bodies) - set(seen) - _victim_bodies(victim_got, bodies)
    assert not lost, f"messages lost: {sorted(lost)}"


def _victim_held(text: str) -> set[str]:
    """The partitions the victim holds now, from its assigned/revoked records."""
    held: set[str] = set()
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue  # being written
        event = json.loads(line)
        if event["e"] == "assigned":
            held |= set(event["keys"])
        elif event["e"] == "revoked":
            held -= set(event["keys"])
    return held


def _victim_bodies(lines: list[str], bodies: list[bytes]) -> set[bytes]:
    """The bodies the victim recorded as received (its record holds message numbers)."""
    numbers = {n for line in lines for n in json.loads(line)["ids"]}
    return {b for b in bodies if int(b.split(b"-", 1)[1]) in numbers}


async def fetch_beyond_end(target: Target, topic: str) -> None:
    """What a SIGKILL leaves of a group's offsets, and a fetch beyond the store's end.

    A group commits (X), waits until the broker wrote its offset file, reads and commits more
    (Y), and the broker is SIGKILLed at once, before its first flush of the new topic: it comes
    back with an empty store and the group's offset at X (Y was only in its memory). A register
    without an offset loads X as it is (``currOffset > maxOffset``); a fetch answers 404 and
    moves the group's offset back to the store's end, which the next commit answers
    (docs/protocol/consumer.md §4.2). Driven with raw broker requests: our consumers register
    again at the end by themselves."""
    victim = target.brokers
    per_round = 12 * target.brokers
    async with ClientBalancedConsumer(
        target.master_addr, group=_group(target, "end"), topics=[topic], consume_from="earliest"
    ) as consumer:
        committed: list[dict[str, int]] = []  # X, then Y
        on_victim: list[str] = []
        for round_ in range(2):
            bodies = [f"e{round_}-{i}".encode() for i in range(per_round)]
            keys = await _send(target, topic, bodies)
            on_victim = sorted({k for k in keys if _store(k) == str(victim)})
            assert on_victim, keys
            for key in on_victim:
                await consumer.connect(key)
            wanted = {b for b, k in zip(bodies, keys, strict=True) if _store(k) == str(victim)}
            read = await _drain_until(consumer, wanted, 30)  # no wait after: the kill follows
            assert wanted <= set(read), sorted(wanted - set(read))
            for key in on_victim:
                await consumer.disconnect(key)  # commits what was acked
            committed.append({k: await _stored_offset(consumer, k) for k in on_victim})
            if round_ == 0:
                await asyncio.sleep(target.offsets_persisted)
        await target.crash_broker(victim)
        first, second = committed
        session = consumer._session
        assert session is not None
        for key in on_victim:
            assert 0 < first[key] < second[key], (key, committed)
            partition = await resolve_partition(session, key, parse_key(key))
            filters = session.config.filters_of(topic)
            reg = await _register_after_restart(session.broker, partition, filters)
            assert reg.success, (key, reg)
            # The offset file held X, not Y; the store came back empty, below X.
            assert reg.max_offset < reg.curr_offset == first[key], (key, reg, committed)
            got = await session.broker.get_message(
                partition, last_pack_consumed=False, esc_flow_ctrl=False
            )
            assert (got.success, got.err_code) == (False, 404), (key, got)
            after = await session.broker.commit(partition, consumed=False)
            assert after.success, (key, after)
            assert after.curr_offset == after.max_offset == reg.max_offset, (key, reg, after)
            await session.broker.unregister(partition, read_status=0)


async def _register_after_restart(
    broker: BrokerRpc, partition: Partition, filters: Iterable[str]
) -> OffsetResponse:
    """A raw register (``read_status=0``) right after the partition's broker restarted. The
    fake's restart takes no time, so the link it reset may still look open to the client: the
    first write on it fails as not sent (nothing reached the broker) and the register goes out
    again on a new link, as after a real restart's seconds it would at once."""
    try:
        return await broker.register(partition, read_status=0, filters=filters)
    except RequestNotSentError:
        return await broker.register(partition, read_status=0, filters=filters)


async def commits_refused(target: Target, topic: str) -> None:
    """A CommitOffset for a partition this client has not registered, and for one another
    client of the group holds, is refused with 401 and moves nothing: the holder still reads
    every message of the partition and its own commit stores the end (docs/protocol/consumer.md
    §6.1; the broker's commit handler, the same in 1.2.0 and 2.4.0). Driven with raw broker
    requests."""
    group = _group(target, "refused")
    bodies = [f"refused-{i}".encode() for i in range(3 * target.partitions)]
    keys = await _send(target, topic, bodies)
    key = keys[0]
    wanted = {b for b, k in zip(bodies, keys, strict=True) if k == key}
    async with (
        ClientBalancedConsumer(
            target.master_addr, group=group, topics=[topic], consume_from="earliest"
        ) as holder,
        ClientBalancedConsumer(
            target.master_addr, group=group, topics=[topic], consume_from="earliest"
        ) as other,
    ):
        session = other._session
        assert session is not None
        partition = await resolve_partition(session, key, parse_key(key))
        alone = await session.broker.commit(partition, consumed=True)
        assert (alone.success, alone.err_code) == (False, 401), alone
        await holder.connect(key)
        first = await _drain_until(holder, {bodies[0]}, 30)
        assert bodies[0] in first, first
        held = await session.broker.commit(partition, consumed=True)
        assert (held.success, held.err_code) == (False, 401), held
        rest = await _drain_until(holder, wanted - set(first), 30)
        assert wanted <= set(first) | set(rest), sorted(wanted - set(first) - set(rest))
        await holder.disconnect(key)  # commits what the holder acked
        reg = await session.broker.register(partition, read_status=0)
        assert reg.success, reg
        await session.broker.unregister(partition, read_status=0)
        assert reg.curr_offset == reg.max_offset, reg  # everything read, and committed


async def fresh_member_after_lost_tail(target: Target, topic: str) -> None:
    """Members with no record of a partition whose broker lost its tail (issue 30).

    Three groups read and commit the messages on the victim broker (X); once the broker wrote
    their offsets, it is SIGKILLed before its first flush of the new topic, so it comes back
    with an empty store while the groups' offsets stay at X. New messages go to it; then each
    group gets a member that never read the partition: its register loads X beyond the end
    (the new messages, fewer than the old, refilled the store from 0 up to below X). With
    ``lost_tail_window=0`` a client-balanced member resumes at the end and skips every new
    message (the broker's own behaviour, and the consumer's before the window); with the
    default window a client-balanced and a server-balanced member resume below X by the
    window (here 0) and read every new message (the old ones never come again: the broker
    lost them)."""
    victim = str(target.brokers)
    groups = {name: _group(target, name) for name in ("off", "cb", "sb")}
    bodies = [f"x-{i}".encode() for i in range(12 * target.brokers)]
    keys = await _send(target, topic, bodies)
    on_victim = sorted({k for k in keys if _store(k) == victim})
    wanted = {b for b, k in zip(bodies, keys, strict=True) if _store(k) == victim}
    assert on_victim, keys
    assert wanted, keys

    await asyncio.gather(
        *(_read_and_commit(target, topic, g, on_victim, wanted) for g in groups.values())
    )
    await asyncio.sleep(target.offsets_persisted)
    await target.crash_broker(target.brokers)
    # Fewer than before, so the store still ends below X when the members register.
    after = [f"y-{i}".encode() for i in range(6 * target.brokers)]
    after_keys = await _send(target, topic, after)
    new = {b for b, k in zip(after, after_keys, strict=True) if _store(k) == victim}
    assert 0 < len(new) < len(wanted), after_keys

    async def client_balanced(group: str, window: int) -> tuple[list[bytes], int]:
        async with ClientBalancedConsumer(
            target.master_addr, group=group, topics=[topic], lost_tail_window=window
        ) as consumer:
            for key in on_victim:
                await consumer.connect(key)
            got = await _drain_until(consumer, new, 30 if window else target.quiet_period)
            return got, consumer.stats.offset_rewinds

    async def server_balanced(group: str) -> tuple[list[bytes], int]:
        async with Consumer(
            target.master_addr, group=group, topics=[topic], join_heartbeat_interval=1.0
        ) as consumer:
            got = await _drain_until(consumer, new, 90)
            return got, consumer.stats.offset_rewinds

    (off, off_rewinds), (cb, cb_rewinds), (sb, sb_rewinds) = await asyncio.gather(
        client_balanced(groups["off"], 0),
        client_balanced(groups["cb"], DEFAULT_LOST_TAIL_WINDOW),
        server_balanced(groups["sb"]),
    )
    assert not new & set(off), sorted(new & set(off))  # the end skips every new message
    assert off_rewinds == len(on_victim), off_rewinds
    for name, got, rewinds in (("cb", cb, cb_rewinds), ("sb", sb, sb_rewinds)):
        assert new <= set(got), (name, sorted(new - set(got)))
        assert not wanted & set(got), (name, sorted(wanted & set(got)))  # lost with the tail
        assert rewinds >= len(on_victim), (name, rewinds)


async def fresh_member_after_refilled_tail(target: Target, topic: str) -> None:
    """The gap left open (issue 30, docs/failures.md): a member with no record registers after
    new messages refilled the restarted broker's store past the group's offset X. The answer
    is an ordinary one, so it resumes at X: exactly the new messages stored below X are
    skipped (no more than the group had read there before the SIGKILL), every later one is
    read."""
    victim = str(target.brokers)
    group = _group(target, "refill")
    bodies = [f"r-{i}".encode() for i in range(12 * target.brokers)]
    keys = await _send(target, topic, bodies)
    on_victim = sorted({k for k in keys if _store(k) == victim})
    wanted = {b for b, k in zip(bodies, keys, strict=True) if _store(k) == victim}
    assert on_victim, keys
    stored = await _read_and_commit(target, topic, group, on_victim, wanted)
    await asyncio.sleep(target.offsets_persisted)
    await target.crash_broker(target.brokers)
    placed: dict[bytes, tuple[str, int]] = {}  # body -> (partition key, append offset)
    async with Producer(target.master_addr, topics=[topic]) as producer:
        for i in range(36 * target.brokers):  # about three times X on the victim
            body = f"s-{i}".encode()
            result = await producer.send(topic, body, timeout=30)
            placed[body] = (result.partition_key, result.append_offset)
    new = {b for b, (k, _) in placed.items() if _store(k) == victim}
    below = {b for b in new if placed[b][1] < stored[placed[b][0]]}
    assert below, (stored, placed)
    assert new - below, (stored, placed)
    async with ClientBalancedConsumer(
        target.master_addr, group=group, topics=[topic], consume_from="earliest"
    ) as consumer:
        for key in on_victim:
            position = await consumer.connect(key)
            assert position.current_offset == stored[key] <= position.max_offset, position
        got = set(await _drain_until(consumer, new - below, 30))
        assert consumer.stats.offset_rewinds == 0
    assert new - below <= got, sorted(new - below - got)
    assert not below & got, sorted(below & got)  # the skip: what was stored below X
    assert len(below) <= len(wanted)  # bounded by what the group had read there


async def _read_and_commit(
    target: Target, topic: str, group: str, keys: list[str], wanted: set[bytes]
) -> dict[str, int]:
    """Connect ``keys`` for ``group`` from the earliest offset, read until every body of
    ``wanted`` arrived (acked) and disconnect, which commits; returns the group's stored
    offset of each key."""
    async with ClientBalancedConsumer(
        target.master_addr, group=group, topics=[topic], consume_from="earliest"
    ) as consumer:
        for key in keys:
            await consumer.connect(key)
        read = await _drain_until(consumer, wanted, 30)
        assert wanted <= set(read), sorted(wanted - set(read))
        for key in keys:
            await consumer.disconnect(key)  # commits what was acked
        return {k: await _stored_offset(consumer, k) for k in keys}


async def _stored_offset(consumer: ClientBalancedConsumer, key: str) -> int:
    """The group's stored offset of ``key`` (a disconnected partition) at its broker: a raw
    register without an offset answers it, and the unregister after it moves nothing."""
    session = consumer._session
    assert session is not None
    partition = await resolve_partition(session, key, parse_key(key))
    reg = await session.broker.register(partition, read_status=0)
    assert reg.success, (key, reg)
    await session.broker.unregister(partition, read_status=0)
    return reg.curr_offset
