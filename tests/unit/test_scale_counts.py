"""A consumer's work per fetch, per ack and per call does not grow with the partitions it holds.

No timing: the lease table's records are kept in a dict that counts every record it hands
out (a lookup, a membership test, or one step of a walk over it), and each path is run with
64 and with 4096 held partitions; the counts must be the same (issue 34, part 1).
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio import ClientBalancedConsumer, Consumer
from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.consumer._broker import BrokerRpc
from tubemq_aio.consumer._fetcher import FetchEngine
from tubemq_aio.consumer._positions import _sorted_keys
from tubemq_aio.consumer.batch import ConsumerStats, PartitionPosition
from tubemq_aio.consumer.config import ConsumerConfig
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition, PartitionKey
from tubemq_aio.protocol.consumer_replies import GetMessageResponse, OffsetResponse, RawMessage
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.partitions import OffsetInfo, PartitionLeases
from tubemq_aio.testing import FakeCluster
from tubemq_aio.testing._fake_store import TopicLayout

BROKER = BrokerInfo(1, "127.0.0.1", 8123)
SIZES = (64, 4096)


class CountingRecords(dict[Any, Any]):
    """A dict counting the records it hands out: ``visits`` grows by one per lookup,
    membership test or removal, and by one per record of a walk (keys, values or items)."""

    visits = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.visits += 1
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.visits += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.visits += 1
        return super().__contains__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self.visits += 1
        return super().pop(key, *default)

    def __iter__(self) -> Iterator[Any]:
        for key in super().__iter__():
            self.visits += 1
            yield key

    def keys(self) -> Any:
        return list(iter(self))

    def values(self) -> Any:
        return [super(CountingRecords, self).__getitem__(k) for k in iter(self)]

    def items(self) -> Any:
        return [(k, super(CountingRecords, self).__getitem__(k)) for k in iter(self)]


class Tally:
    """The visits of the lease table's two dicts (its records and its offsets) together;
    setting ``visits`` resets both."""

    def __init__(self, *dicts: CountingRecords) -> None:
        self.dicts = dicts

    @property
    def visits(self) -> int:
        return sum(d.visits for d in self.dicts)

    @visits.setter
    def visits(self, value: int) -> None:
        for d in self.dicts:
            d.visits = 0
        self.dicts[0].visits = value


def counted(leases: PartitionLeases) -> Tally:
    """Swap the table's record and offsets dicts for counting ones (before any partition is
    added)."""
    records, offsets = CountingRecords(), CountingRecords()
    leases._entries = records  # the records of the table, counted
    leases._offsets = offsets  # and the offsets of each
    return Tally(records, offsets)


def raw(i: int) -> RawMessage:
    body = f"m{i}".encode()
    return RawMessage(i, checksum(body), body, 0)


class DataBroker:
    """Every fetch returns three messages; every commit succeeds."""

    def __init__(self) -> None:
        self.astray = AstrayCalls(1.0)  # no call fails here: nothing is noted
        self.offset = 0

    async def get_message(
        self, partition: Partition, *, last_pack_consumed: bool, esc_flow_ctrl: bool
    ) -> GetMessageResponse:
        await asyncio.sleep(0)
        self.offset += 84
        messages = (raw(1), raw(2), raw(3))
        return GetMessageResponse(
            True, 200, "OK", messages, self.offset, self.offset + 280, 0, 0, False, False
        )

    async def commit(self, partition: Partition, *, consumed: bool) -> OffsetResponse:
        return OffsetResponse(True, 200, "OK", self.offset, self.offset + 280)


async def fetch_and_ack_visits(partitions: int, batches: int) -> tuple[int, int]:
    """Records visited by ``batches`` fetch + get + ack rounds once warm; and the fetch count."""
    config = ConsumerConfig(
        masters="127.0.0.1:8715",  # type: ignore[arg-type]  # normalised by the config
        group="g1",
        topics=["t"],  # type: ignore[arg-type]
        fetchers=2,
        max_prefetch_batches=2,
    )
    leases = PartitionLeases()
    records = counted(leases)
    loop = asyncio.get_running_loop()
    for i in range(partitions):
        leases.add(Partition(BROKER, "t", i), 0.0)
    stats = ConsumerStats()
    engine = FetchEngine(
        config, leases, cast(BrokerRpc, DataBroker()), FlowControlState(), stats, loop.time
    )
    tasks = [loop.create_task(engine.run()) for _ in range(config.fetchers)]
    try:
        for _ in range(5):  # warm up: buffer full, fetchers parked on the slots
            assert await (await engine.get(None, 5)).ack()
        records.visits, fetches = 0, stats.fetches
        for _ in range(batches):
            batch = await engine.get(None, 5)
            assert len(batch) == 3
            assert await batch.ack()
        return records.visits, stats.fetches - fetches
    finally:
        engine.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_fetch_and_ack_visit_the_same_records_at_64_and_4096_partitions() -> None:
    """Per fetched, handed-out and acked batch the lease table is touched a fixed number of
    times: not one walk over the held partitions (it was one offsets() dict per fetch)."""
    counts = [await fetch_and_ack_visits(p, batches=200) for p in SIZES]
    (small, small_fetches), (large, large_fetches) = counts
    assert small_fetches == large_fetches == 200
    assert small == large
    assert small / small_fetches < 16  # a handful of lookups a batch


def idle_fetch_visits(partitions: int, fetches: int) -> tuple[int, int, int]:
    """A fetcher of a consumer whose partitions all answer "no data" (404 → 400 ms delay),
    on a simulated clock. Returns (visits in take + release, visits in next_ready_at,
    next_ready_at calls), counted after every partition was fetched once. The clock stands
    still while ready partitions are taken and jumps to the next ready time otherwise."""
    leases = PartitionLeases()
    records = counted(leases)
    for i in range(partitions):
        leases.add(Partition(BROKER, "t", i), 0.0)
    now, done, waits = 0.0, 0, 0
    per_fetch = at_next = 0
    while done < partitions + fetches:
        if done == partitions:  # the first round (from idle) is not counted
            per_fetch = at_next = waits = 0
        before = records.visits
        lease = leases.take(now)
        if lease is None:
            before_wait = records.visits
            ready = leases.next_ready_at()
            assert ready is not None
            at_next += records.visits - before_wait
            waits += 1
            now = ready
            continue
        assert leases.release(lease.key, lease.token, now, wait_ms=400)
        per_fetch += records.visits - before
        done += 1
    return per_fetch, at_next, waits


def test_idle_fetches_visit_the_same_records_at_64_and_4096_partitions() -> None:
    """Taking the next ready partition and delaying it again costs the same per fetch
    whatever the number of held partitions; finding when the next one is ready reads one
    record (the head of the delay queue), not every delayed partition."""
    fetches = 8192  # whole rounds at both sizes: every counted delay ends inside the count
    small = idle_fetch_visits(SIZES[0], fetches)
    large = idle_fetch_visits(SIZES[1], fetches)
    # take: promote (check + move) and pop; release: one lookup.
    assert small[0] == large[0] == 4 * fetches
    assert small[1] == small[2] > 0
    assert large[1] == large[2] > 0


def test_offset_of_one_partition_visits_one_record() -> None:
    for partitions in SIZES:
        leases = PartitionLeases()
        records = counted(leases)
        for i in range(partitions):
            leases.add(Partition(BROKER, "t", i), 0.0, curr_offset=28 * i, max_offset=28 * 10)
        records.visits = 0
        info = leases.offset_of(Partition(BROKER, "t", 7).key)
        assert info is not None
        assert info.curr_offset == 196
        assert info.lag == 3
        assert records.visits == 1
        assert leases.offset_of(Partition(BROKER, "t", partitions).key) is None


def test_expire_unconfirmed_and_in_use_visit_only_leased_partitions() -> None:
    for partitions in SIZES:
        leases = PartitionLeases()
        records = counted(leases)
        for i in range(partitions):
            leases.add(Partition(BROKER, "t", i), 0.0)
        held = [leases.take(0.0) for _ in range(3)]
        assert all(lease is not None for lease in held)
        records.visits = 0
        assert len(leases.in_use()) == 3
        assert leases.expire_unconfirmed(1.0, timeout=60.0) == []
        expired = leases.expire_unconfirmed(61.0, timeout=60.0)
        assert len(expired) == 3
        assert not leases.in_use()
        # Per leased partition: its age, its token, its release (and its age earlier at 1.0).
        assert records.visits == 4 * 3


def positions_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the positions ``positions()`` snapshots build, in order (counted)."""
    built: list[str] = []
    real = PartitionPosition.of

    def counting(partition_key: str, offsets: OffsetInfo | None) -> PartitionPosition:
        built.append(partition_key)
        return real(partition_key, offsets)

    monkeypatch.setattr(PartitionPosition, "of", counting)
    return built


def test_positions_call_visits_no_record_and_builds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """positions() is one copy of the offsets dict (C-level for the table's plain dict; this
    counting dict is copied through its keys and items) and nothing else: no lease record
    visited and no position object built, at 64 and at 4096 partitions (it built one object
    per partition per call: 48 ms at 8 192). Reading one position visits nothing more and
    builds one."""
    built = positions_built(monkeypatch)
    for partitions in SIZES:
        consumer = Consumer("127.0.0.1:8715", group="g1", topics=["t"])
        leases = consumer._leases
        tally = counted(leases)
        for i in range(partitions):
            leases.add(Partition(BROKER, "t", i), 0.0, curr_offset=0, max_offset=28)
        records, offsets = tally.dicts
        tally.visits, built[:] = 0, []
        got = consumer.positions()
        assert (records.visits, offsets.visits, built) == (0, 2 * partitions, [])
        tally.visits = 0
        assert len(got) == partitions
        assert got["1:t:3"].lag == 1
        assert "1:t:3" in got
        assert (tally.visits, built) == (0, ["1:t:3"])
        assert got["1:t:3"] is consumer.positions()["1:t:3"]  # kept while unchanged


def test_positions_reads_each_position_once_while_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading every position builds each once; the next snapshot rebuilds only what
    changed; a snapshot keeps its offsets as of the call; order is by key."""
    built = positions_built(monkeypatch)
    for partitions in SIZES:
        consumer = Consumer("127.0.0.1:8715", group="g1", topics=["t"])
        leases = consumer._leases
        for i in reversed(range(partitions)):
            leases.add(Partition(BROKER, "t", i), 0.0, curr_offset=0, max_offset=28)
        built[:] = []
        first = consumer.positions()
        assert sum(p.lag for p in first.values()) == partitions
        assert len(built) == partitions
        assert list(first)[:3] == ["1:t:0", "1:t:1", "1:t:2"]
        leases.update_offsets(Partition(BROKER, "t", 3).key, 1.0, curr_offset=28)
        built[:] = []
        got = consumer.positions()
        assert dict(got.items()) == {k: got[k] for k in got}
        assert built == ["1:t:3"]  # only the partition whose offsets changed
        assert (got["1:t:3"].lag, got["1:t:3"].current_offset) == (0, 28)
        assert (first["1:t:3"].lag, first["1:t:3"].current_offset) == (1, 0)  # the snapshot
        leases.remove(Partition(BROKER, "t", 0).key)
        leases.add(Partition(BROKER, "t", partitions), 2.0)
        latest = consumer.positions()
        assert "1:t:0" not in latest
        assert "1:t:0" in got
        assert list(latest)[-1] == f"1:t:{partitions}"
        assert latest[f"1:t:{partitions}"].current_offset == -2
        assert len(latest) == len(got) == partitions


@pytest.mark.parametrize("text", ["01:t:3", "1:t:3:0", "", "1:u:3", "1:t:99999", 7, None])
def test_positions_missing_keys_are_key_errors(text: object) -> None:
    """Texts that are not a held partition's key: KeyError, ``in`` False, ``get`` None,
    before and after the snapshot was walked (the walk builds a text index)."""
    consumer = Consumer("127.0.0.1:8715", group="g1", topics=["t"])
    for i in range(5):
        consumer._leases.add(Partition(BROKER, "t", i), 0.0)
    got = consumer.positions()
    for _ in range(2):
        assert text not in got
        assert got.get(text) is None  # type: ignore[call-overload]
        with pytest.raises(KeyError):
            got[text]  # type: ignore[index]
        assert len(list(got)) == 5  # walked: the second round uses the index


def test_positions_reads_like_the_dict_it_was() -> None:
    """Equal to a dict of the same items, printed like one, read-only."""
    consumer = Consumer("127.0.0.1:8715", group="g1", topics=["t"])
    assert consumer.positions() == {}
    consumer._leases.add(Partition(BROKER, "t", 1), 0.0, curr_offset=28, max_offset=84)
    got = consumer.positions()
    want = {"1:t:1": PartitionPosition("1:t:1", 28, 84, 2)}
    assert got == want
    assert repr(got) == repr(want)
    assert isinstance(got, Mapping)
    with pytest.raises(TypeError):
        got["1:t:1"] = want["1:t:1"]  # type: ignore[index]


async def connect_visits(held: int) -> tuple[int, int, int]:
    """Records visited by one ClientBalancedConsumer.connect() while ``held`` are held, the
    fetcher wake-ups it caused and the per-partition locks left behind."""
    layout = TopicLayout("demo", partitions=held + 1)
    async with (
        FakeCluster(topics={"demo": layout}) as cluster,
        ClientBalancedConsumer(
            cluster.master_addr,
            group="cb",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=300.0,  # no heartbeat round (one walk of the table) meanwhile
        ) as consumer,
    ):
        metas = await consumer.partitions()
        assert len(metas) == held + 1
        records = counted(consumer._leases)
        host, _, port = metas[0].broker.rpartition(":")
        broker = BrokerInfo(metas[0].broker_id, host, int(port))
        leases = consumer._leases
        others = [Partition(broker, "demo", i) for i in range(1, held + 1)]
        for partition in others:  # held in the table (connecting each is not the point)
            leases.add(partition, 0.0)
        # Paused, so no fetcher takes them meanwhile (nor drains their queue entries, below).
        leases.pause(p.key for p in others)
        assert leases.take(0.0) is None  # drops the queue entries of the paused partitions
        engine = consumer._engine
        assert engine is not None
        wakes = 0
        real_set = engine.changed.set

        def counting_set() -> None:
            nonlocal wakes
            wakes += 1
            real_set()

        engine.changed.set = counting_set  # type: ignore[method-assign]
        records.visits = 0
        position = await consumer.connect("1:demo:0")
        assert position.partition_key == "1:demo:0"
        return records.visits, wakes, len(consumer._locks)


async def test_client_balanced_connect_visits_the_same_records_at_64_and_4096() -> None:
    """Connecting one more partition costs the same whatever is held already (it built a
    dict of every held partition for the answer's position)."""
    small, large = [await connect_visits(p) for p in SIZES]
    assert small[0] == large[0]
    assert small[0] < 10
    for _, wakes, locks in (small, large):
        # At most one wake-up of the fetchers (none when one of them wakes before the new
        # partition is ready anyway), not one per fetcher or per held partition.
        assert wakes <= 1
        assert locks == 0  # the partition's lock is dropped once the call is done


@given(
    partitions=st.integers(0, 12000),
    stores=st.integers(0, 3),
    partition_id=st.integers(-5, 35000),
)
def test_fake_layout_membership_matches_the_partition_list(
    partitions: int, stores: int, partition_id: int
) -> None:
    """The fake broker's O(1) partition check answers like the list it used to build."""
    layout = TopicLayout("t", partitions=partitions, stores=stores)
    assert layout.has_partition(partition_id) == (partition_id in layout.partition_ids())


@given(
    keys=st.lists(
        st.builds(
            PartitionKey,
            st.integers(0, 5),
            st.sampled_from(["a", "b", "t", "t2"]),
            st.integers(0, 30000),
        ),
        unique=True,
        max_size=60,
    )
)
def test_positions_order_is_the_key_order(keys: list[PartitionKey]) -> None:
    """The three stable one-field sorts of positions() give the keys' own order."""
    assert _sorted_keys(keys) == sorted(keys)


def test_broker_heartbeat_grouping_visits_no_record_at_64_and_4096() -> None:
    """The broker heartbeat round groups the held partitions by broker without a walk over
    the lease records (it regrouped every partition, a dict step each, every round: a sixth
    of an idle consumer's CPU at 2 048 partitions with a 1 s heartbeat), and a partition's
    wire text is made once, not per heartbeat."""
    other = BrokerInfo(2, "127.0.0.2", 8123)
    for partitions in SIZES:
        leases = PartitionLeases()
        records = counted(leases)
        held = [Partition(BROKER if i % 2 else other, "t", i) for i in range(partitions)]
        for partition in held:
            leases.add(partition, 0.0)
        leases.remove(held[0].key)
        records.visits = 0
        groups = leases.by_broker()
        assert records.visits == 0
        assert groups == {other: held[2::2], BROKER: held[1::2]}
        groups[BROKER].clear()  # the caller's own lists
        assert len(leases.by_broker()[BROKER]) == partitions // 2
        assert held[1].format() is held[1].format()  # made once
        assert held[1].format() == "1:127.0.0.1:8123#t:1"
    leases = PartitionLeases()
    leases.add(held[1], 0.0)
    leases.remove(held[1].key)
    assert leases.by_broker() == {}  # a broker with nothing held is not heartbeated


def test_a_partition_key_pickles_by_its_fields() -> None:
    """The key's hash is made once; pickled, it is made again where it is loaded (a string's
    hash differs between processes), so a loaded key finds its dict entries."""
    key = PartitionKey(1, "t", 3)
    loaded = pickle.loads(pickle.dumps(key))
    assert loaded == key
    assert hash(loaded) == hash((1, "t", 3))
    assert {key: "x"}[loaded] == "x"
    assert key.__reduce__() == (PartitionKey, (1, "t", 3))
    assert str(loaded) == loaded.format() == "1:t:3"
