"""The send attempt's fast halves (``FastAttempt``): the pure class and its compiled twin each do
what the general path does (``SendAttempts.begin``, and an answer booked through the back-off,
the parser and the broker blocker one by one), on random sequences of sends, answers, failures,
clock steps and connection changes.

Two worlds are built alike (session, metadata, blocker, back-off, seeded round robin, encoder,
parser, a transport remembering connections on a loop that never runs); one goes through the
fast halves, the other through the general ones, and after every step both gave the same
answer and hold the same state: the chosen partition, the request written (its serial, its
bytes, its deadline) or handed back, the round robin's counters, the back-off's and the
blocker's tables.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.send_stand_ins import StandInPool, answer, filled_registry
from tests.support.speedup_impls import EXT, pure_and_compiled
from tubemq_aio._io import registry
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.accelerator import twin_or
from tubemq_aio.errors import ConnectError, RequestNotSentError, ServerError, TubeMQError
from tubemq_aio.producer import _attempts, _fast_attempt
from tubemq_aio.producer._attempts import NO_AVOID, SendAttempts, fast_attempt
from tubemq_aio.producer._fast_attempt import FastAttempt
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.producer.config import ProducerConfig
from tubemq_aio.protocol.broker_blocking import BrokerBlocker, BrokerBlockingConfig
from tubemq_aio.protocol.producer_master_values import HeartbeatResponse, RegisterResponse
from tubemq_aio.protocol.producer_meta import Partition, TopicMeta
from tubemq_aio.protocol.retry import RetryPolicy
from tubemq_aio.protocol.routing import DefaultPartitioner, Partitioner, RoundRobinPartitioner

BODY = b"plain body " * 9
TIMEOUT = 3.0
TIMEOUT_MS = 3000
BROKERS = (("127.0.0.1", 8123), ("127.0.0.1", 8124))


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowRoundRobin(RoundRobinPartitioner):
    """A round robin of another class: the fast half leaves its choice to the general path."""

    __slots__ = ()


def _connection(base: type[Any], loop: asyncio.AbstractEventLoop, clock: Clock) -> Any:
    """A connection's registration state (``base``: a registry class) with ``is_closed``."""

    class Conn(base):  # type: ignore[misc]
        @property
        def is_closed(self) -> bool:
            return self._closed is not None

    conn = filled_registry(Conn, loop, legacy=False, room=1000)
    conn._clock = clock
    return conn


class World:
    """A producer's attempts over two brokers of topic ``t`` (3 partitions each), with a
    remembered connection to each broker; ``fast``: the class of its fast halves, or None to
    go the general way."""

    def __init__(
        self,
        fast: type[Any] | None,
        conn_base: type[Any],
        loop: asyncio.AbstractEventLoop,
        partitioner: Partitioner,
        clock: Clock | None = None,
    ) -> None:
        self.clock = Clock() if clock is None else clock
        self.begun: list[Partition] = []
        config = ProducerConfig(masters="127.0.0.1:1", telemetry=False)  # type: ignore[arg-type]
        session = ProducerSession(config, None)  # type: ignore[arg-type]
        session.client_id = "127.0.0.1-1-1-1-tubemq-aio"  # the same in both worlds
        brokers = ("1:127.0.0.1:8123", "2:127.0.0.1:8124")
        session.metadata.apply_register(RegisterResponse(True, 200, "OK", 5, brokers), 0)
        infos = ("t#1:3:1,2:3:1#",)
        heartbeat = HeartbeatResponse(True, 200, "OK", 5, topic_infos=infos)
        session.metadata.apply_heartbeat(heartbeat, 0)
        self.rpc = RpcClient(StandInPool())  # type: ignore[arg-type]
        self.blocker = BrokerBlocker(BrokerBlockingConfig())
        self.attempts = SendAttempts(self.rpc, session, self.blocker, partitioner, RetryPolicy())
        self.fast = None if fast is None else fast_attempt(self.attempts, self.clock, fast)
        if self.fast is not None:
            self.attempts.fast = self.fast
        self.conns = [_connection(conn_base, loop, self.clock) for _ in BROKERS]
        self.partitioner = partitioner
        for index in range(len(BROKERS)):
            self.remember(index)

    def remember(self, index: int) -> None:
        host, port = BROKERS[index]
        self.rpc._conns.setdefault(host, {})[port] = self.conns[index]

    def forget(self, index: int) -> None:
        host, port = BROKERS[index]
        self.rpc._conns.get(host, {}).pop(port, None)

    def begin(self, topic: str) -> object:
        """A plain first attempt: its flattened outcome, or the error it raised."""
        now = self.clock.now
        try:
            if self.fast is not None:
                partition, conn, serial, started = self.fast.begin_plain(
                    topic, BODY, now, TIMEOUT_MS, TIMEOUT
                )
            else:
                partition, begun = self.attempts.begin(
                    topic, None, NO_AVOID, now, BODY, TIMEOUT_MS, TIMEOUT
                )
                conn, serial, started = (None, 0, begun) if isinstance(begun, bytes) else begun
        except TubeMQError as exc:
            return ("raised", type(exc), str(exc))
        self.begun.append(partition)
        which = None if conn is None else self.conns.index(conn)
        return partition.partition_key, which, serial, started if conn is None else "future"

    def answered(self, data: bytes, partition: Partition) -> object:
        """Book an answer: through the fast half, or the general booking done step by step."""
        try:
            if self.fast is not None:
                result: object = self.fast.answered(data, partition)
            else:
                result = self._booked(data, partition)
        except TubeMQError as exc:
            return ("raised", type(exc), str(exc))
        if isinstance(result, ServerError):
            return ("refused", type(result), result.err_code)
        return result

    def _booked(self, data: bytes, partition: Partition) -> object:
        """What ``SendAttempts.answered`` did before the fast half: back-off, parse, blocker."""
        self.attempts.backoff.record_response(partition.partition_key)
        broker_id = partition.broker.broker_id
        try:
            result = self.attempts.parse_answer(data, partition)
        except ServerError as exc:
            self.blocker.record(broker_id, False, self.clock(), err_code=exc.err_code)
            if exc.err_code not in _fast_attempt.REFUSED_CODES:
                raise
            return exc
        self.blocker.record(broker_id, True, self.clock())
        return result

    def failed(self, exc: TubeMQError, partition: Partition) -> object:
        try:
            returned = self.attempts.failed(exc, partition, self.clock.now)
        except TubeMQError as raised:
            return ("raised", type(raised))
        return ("returned", type(returned))

    def state(self) -> object:
        backoff = self.attempts.backoff
        select = self.attempts._select_unkeyed
        owner = getattr(select, "__self__", None)
        counters = dict(getattr(owner, "_counters", {}))
        conns = [
            (
                c._serial,
                sorted((s, e[1], e[2]) for s, e in c._pending.items()),
                b"".join(c._wbuf),
                c.stats.requests_sent,
                c.next_deadline,
            )
            for c in self.conns
        ]
        remembered = {h: sorted(p) for h, p in self.rpc._conns.items()}
        return (
            self.blocker.snapshot(),
            self.blocker.last_blocked,
            dict(backoff._failures),
            dict(backoff._until),
            counters,
            conns,
            remembered,
        )


_CODES = (200, 200, 200, 503, 419, 400, 500)

_steps = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(("t", "t", "t", "gone"))),
    st.tuples(st.just("answer"), st.sampled_from(_CODES), st.integers(0, 30)),
    st.tuples(st.just("garbage"), st.integers(0, 30)),
    st.tuples(st.just("fail"), st.sampled_from(("connect", "not-sent")), st.integers(0, 30)),
    st.tuples(st.just("advance"), st.sampled_from((0.001, 1.0, 3.5, 31.0, 51.0))),
    st.tuples(st.just("close"), st.integers(0, 1)),
    st.tuples(st.just("forget"), st.integers(0, 1)),
    st.tuples(st.just("remember"), st.integers(0, 1)),
    st.tuples(st.just("room"), st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("flush"), st.integers(0, 1)),
)


def _apply(world: World, step: tuple[Any, ...]) -> object:
    kind = step[0]
    if kind == "send":
        return world.begin(step[1])
    if kind in ("answer", "garbage", "fail"):
        if not world.begun:
            return None
        partition = world.begun[step[-1] % len(world.begun)]
        if kind == "answer":
            return world.answered(answer(step[1]), partition)
        if kind == "garbage":
            return world.answered(b"\xff\xff", partition)
        exc = ConnectError("refused") if step[1] == "connect" else RequestNotSentError("lost")
        return world.failed(exc, partition)
    if kind == "advance":  # the clock both worlds share: the general one moves it
        if world.fast is None:
            world.clock.now += step[1]
    elif kind == "close":
        world.conns[step[1]]._closed = ConnectionError("closed")
    elif kind == "forget":
        world.forget(step[1])
    elif kind == "remember":
        world.remember(step[1])
    elif kind == "room":
        world.conns[step[1]]._max_in_flight = step[2]
    elif kind == "flush":
        world.conns[step[1]]._wbuf = []
    return None


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _partitioners(seed: int) -> dict[str, Partitioner]:
    return {
        "default": DefaultPartitioner(RoundRobinPartitioner(random.Random(seed))),
        "round-robin": RoundRobinPartitioner(random.Random(seed)),
        "other": SlowRoundRobin(random.Random(seed)),
    }


@pytest.mark.parametrize("fast", pure_and_compiled(FastAttempt, "FastAttempt"))
@pytest.mark.parametrize("conn_base", pure_and_compiled(registry.SendRegistry, "SendRegistry"))
@pytest.mark.parametrize("partitioner", ["default", "round-robin", "other"])
@settings(max_examples=examples(150), deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.lists(_steps, max_size=60))
def test_the_fast_halves_do_what_the_general_path_does(
    fast: type[Any], conn_base: type[Any], partitioner: str, seed: int, steps: list[tuple[Any, ...]]
) -> None:
    loop = asyncio.new_event_loop()  # never run: futures and call_soon need one
    clock = Clock()  # both worlds' (SendAttempts.failed reads time.monotonic itself)
    try:
        with mock.patch.object(_attempts, "time", SimpleNamespace(monotonic=clock)):
            worlds = [
                World(kind, conn_base, loop, _partitioners(seed)[partitioner], clock)
                for kind in (fast, None)
            ]
            fast_world, general = worlds
            assert fast_world.state() == general.state()
            for step in steps:
                assert _apply(fast_world, step) == _apply(general, step), step
                assert fast_world.state() == general.state(), step
    finally:
        loop.close()


def test_the_producer_uses_the_compiled_twin_when_built() -> None:
    twin = getattr(EXT, "FastAttempt", None)
    built = _fast_attempt.BuiltFastAttempt
    if twin is not None and twin_or(FastAttempt) is twin:
        assert built is twin
    else:
        assert built is FastAttempt


@pytest.mark.parametrize("fast", pure_and_compiled(FastAttempt, "FastAttempt"))
def test_a_plain_send_on_a_quiet_producer_takes_the_fast_way(
    loop: asyncio.AbstractEventLoop, fast: type[Any]
) -> None:
    """Nothing blocked, backed off or due: the general path is not called once the round robin
    knows the topic (the first send draws its random start there)."""
    base = getattr(EXT, "SendRegistry", registry.SendRegistry)
    world = World(fast, base, loop, DefaultPartitioner())
    calls = []
    general = world.attempts.begin

    def counted(*args: Any) -> Any:
        calls.append(args[0])
        return general(*args)

    assert world.fast is not None
    world.fast._begin = counted
    first = world.begin("t")
    assert calls == ["t"]
    assert first[1] is not None  # type: ignore[index]  # written on its remembered connection
    for _ in range(10):
        world.begin("t")
        world.answered(answer(200), world.begun[-1])
    assert calls == ["t"]
    assert world.blocker.snapshot().window[1][1] + world.blocker.snapshot().window[2][1] == 10
    world.answered(answer(503), world.begun[-1])  # blocks its broker: the general way again
    world.begin("t")
    assert calls == ["t", "t"]


class OtherPartition(Partition):
    """A partition of another class (the same slots): the twin learns its layout again."""

    __slots__ = ()


@pytest.mark.parametrize("fast", pure_and_compiled(FastAttempt, "FastAttempt"))
def test_partitions_of_mixed_classes_are_read_as_python_reads_them(
    loop: asyncio.AbstractEventLoop, fast: type[Any]
) -> None:
    base = getattr(EXT, "SendRegistry", registry.SendRegistry)
    clock = Clock()
    worlds = [
        World(kind, base, loop, RoundRobinPartitioner(random.Random(7)), clock)
        for kind in (fast, None)
    ]
    for world in worlds:
        metadata = world.attempts.session.metadata
        meta = metadata._topics["t"]
        mixed = tuple(
            OtherPartition(p.broker, p.topic, p.partition_id) if i % 2 else p
            for i, p in enumerate(meta.partitions)
        )
        metadata._topics["t"] = TopicMeta(meta.topic, mixed, meta.max_msg_size)
    fast_world, general = worlds
    with mock.patch.object(_attempts, "time", SimpleNamespace(monotonic=clock)):
        for _ in range(14):
            assert fast_world.begin("t") == general.begin("t")
            assert fast_world.answered(answer(200), fast_world.begun[-1]) == general.answered(
                answer(200), general.begun[-1]
            )
            assert fast_world.state() == general.state()
    assert {type(p) for p in fast_world.begun} == {Partition, OtherPartition}
