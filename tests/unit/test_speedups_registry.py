"""The connection's registration state (``SendRegistry``) and the send window's count
(``WindowSlots``): each compiled twin does what its pure reference does, operation by
operation, on random sequences of sends, answers, waits and releases.

Both are driven on a loop that never runs (futures and ``call_soon`` need one, not a running
one), with the same clock, and compared after every step: what ``start_parts`` and ``resolve``
return or raise, the write list, the pending table, the serial, the earliest deadline, the
counters and every future's outcome.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.send_stand_ins import REGISTRY_NOW as NOW
from tests.support.send_stand_ins import filled_registry
from tests.support.speedup_impls import EXT, pure_and_compiled
from tubemq_aio import accelerator
from tubemq_aio._io import registry
from tubemq_aio._io.decisions import IO_EXCEPTION_NAMES, MAX_SERIAL
from tubemq_aio._io.pending import PendingCalls
from tubemq_aio.errors import LocalProtocolError
from tubemq_aio.producer._window import SendWindow, WindowSlots
from tubemq_aio.protocol.framing import BLOCK_SIZE, FrameDecoder
from tubemq_aio.protocol.legacy_framing import LengthPrefixedDecoder
from tubemq_aio.protocol.rpc import encode_exception, encode_success

#: Built from this source (an older build lacks the twin and runs the pure code).
CURRENT = EXT is not None and hasattr(EXT, "SendRegistry") and hasattr(EXT, "WindowSlots")
#: What the pure registry is compared with: the compiled twin, or itself where none is built.
TWIN: type[Any] = getattr(EXT, "SendRegistry", registry.SendRegistry)
FAR = 1e9  # "no deadline yet" sentinel is math.inf; far deadlines stay below it


@pytest.mark.parametrize(
    ("built", "pure"),
    [(PendingCalls, registry.SendRegistry), (SendWindow, WindowSlots)],
    ids=["connection", "send-window"],
)
def test_built_on_the_compiled_twin_when_present(built: type[Any], pure: type[Any]) -> None:
    if os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0"):
        assert CURRENT, "the built extension is older than its source: rebuild it"
    twin = getattr(EXT, pure.__name__, None)
    if twin is not None and accelerator.compiled() is not None:
        assert built.__mro__[1] is twin
    else:
        assert built.__mro__[1] is pure


def _classes() -> list[Any]:
    return pure_and_compiled(registry.SendRegistry, "SendRegistry")


def _outcome(fut: asyncio.Future[Any]) -> object:
    if not fut.done():
        return "pending"
    if fut.cancelled():
        return "cancelled"
    exc = fut.exception()
    if exc is not None:
        return (type(exc).__name__, str(exc))
    return ("result", fut.result())


def _error(exc: BaseException | None) -> object:
    return None if exc is None else (type(exc).__name__, str(exc))


class _Side:
    """One registry and everything it handed out, in a comparable form."""

    def __init__(self, cls: type[Any], legacy: bool, room: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.reg = filled_registry(cls, self.loop, legacy, room)
        self.futures: dict[int, asyncio.Future[bytes]] = {}
        self.waiters: list[asyncio.Future[None]] = []

    def state(self) -> object:
        reg = self.reg
        stats = reg.stats.snapshot()
        return (
            b"".join(reg._wbuf),
            len(reg._wbuf) > 0,
            {s: (e[1], e[2]) for s, e in reg._pending.items()},
            sorted(reg._raw),
            reg._serial,
            reg.next_deadline,
            stats,
            {s: _outcome(f) for s, f in self.futures.items()},
            [_outcome(w) for w in self.waiters],
            len(reg._room_waiters),
            len(self.loop._ready),  # type: ignore[attr-defined]  # callbacks scheduled
        )

    def __enter__(self) -> _Side:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fut in self.futures.values():
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: no "never retrieved" warning
        self.loop.close()


_SEND_ANSWERS = st.one_of(
    st.binary(max_size=300).map(lambda b: ("ok", b)),
    st.tuples(
        st.sampled_from(
            [*sorted(IO_EXCEPTION_NAMES), "java.io.IOException", "tubemq.OtherException", "X"]
        ),
        st.text(max_size=30),
    ).map(lambda t: ("err", t)),
    st.binary(max_size=40).map(lambda b: ("junk", b)),
)


def _payload(kind: tuple[str, Any], method: int) -> bytes:
    what, value = kind
    if what == "ok":
        return encode_success(method, value)
    if what == "err":
        return encode_exception(value[0], value[1])
    return bytes(value)


_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("start"),
            st.integers(min_value=0, max_value=2 * BLOCK_SIZE + 5),
            st.sampled_from([0.5, 1, 30.0, 1e-3]),
            st.one_of(st.none(), st.floats(min_value=0, max_value=FAR)),
            st.integers(min_value=1, max_value=3),
        ),
        st.tuples(
            st.just("answer"),
            st.lists(st.tuples(st.integers(min_value=-2, max_value=12), _SEND_ANSWERS), max_size=6),
            st.integers(min_value=0, max_value=300),
        ),
        st.tuples(st.just("raw"), st.integers(min_value=0, max_value=12)),
        st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=12)),
        st.tuples(st.just("waiter"), st.booleans()),
        st.tuples(st.just("pause"), st.booleans()),
        st.tuples(st.just("close"), st.booleans()),
        st.tuples(st.just("flush")),
        st.tuples(st.just("wrap"), st.integers(min_value=0, max_value=3)),
    ),
    max_size=30,
)


def _step(side: _Side, op: tuple[Any, ...]) -> object:
    """Apply one operation; return what it gave (in a comparable form)."""
    reg = side.reg
    kind = op[0]
    if kind == "start":
        _, size, timeout, deadline, pieces = op
        body = bytes(i % 251 for i in range(size))
        cut = [size * k // pieces for k in range(pieces + 1)]
        parts = tuple(body[cut[k] : cut[k + 1]] for k in range(pieces))
        try:
            started = reg.start_parts(parts, size, timeout, deadline)
        except LocalProtocolError as exc:
            return _error(exc)
        if started is None:
            return None
        conn, serial, fut = started
        assert conn is reg
        side.futures[serial] = fut
        return serial
    if kind == "answer":
        _, answers, method = op
        serials = sorted(reg._pending) or [1]
        frames = [
            (serials[pick % len(serials)] if pick >= 0 else 1000 + pick, _payload(a, method))
            for pick, a in answers
        ]
        return _error(reg.resolve(frames))
    if kind in ("raw", "cancel"):
        serials = sorted(side.futures)
        if serials:
            serial = serials[op[1] % len(serials)]
            if kind == "raw":
                if serial in reg._pending:
                    reg._raw.add(serial)
            else:
                side.futures[serial].cancel()
        return None
    if kind == "waiter":
        waiter = side.loop.create_future()
        if op[1]:
            waiter.cancel()  # a waiter that gave up: skipped by the wake-up
        side.waiters.append(waiter)
        reg._room_waiters.append(waiter)
        return None
    if kind == "pause":
        reg._paused = op[1]
        return None
    if kind == "close":
        reg._closed = ConnectionError("closed") if op[1] else None
        return None
    if kind == "flush":
        reg._flush()
        return None
    reg._serial = MAX_SERIAL - op[1]
    return None


@settings(max_examples=examples(300), deadline=None)
@given(ops=_OPS, legacy=st.booleans(), room=st.integers(min_value=1, max_value=6))
def test_compiled_registry_does_what_the_pure_one_does(
    ops: list[tuple[Any, ...]], legacy: bool, room: int
) -> None:
    pure, compiled = _Side(registry.SendRegistry, legacy, room), _Side(TWIN, legacy, room)
    try:
        for op in ops:
            assert _step(compiled, op) == _step(pure, op), op
            assert compiled.state() == pure.state(), op
    finally:
        pure.close()
        compiled.close()


def _frames_of(wbuf: list[bytes], legacy: bool) -> Iterator[tuple[int, bytes]]:
    decoder = LengthPrefixedDecoder(1 << 20) if legacy else FrameDecoder()
    yield from decoder.feed(b"".join(wbuf))


@pytest.mark.parametrize("cls", _classes())
@pytest.mark.parametrize("legacy", [False, True])
@settings(max_examples=examples(100), deadline=None)
@given(bodies=st.lists(st.binary(min_size=1, max_size=3 * BLOCK_SIZE), min_size=1, max_size=5))
def test_written_frames_carry_each_request_under_its_serial(
    cls: type[Any], legacy: bool, bodies: list[bytes]
) -> None:
    with _Side(cls, legacy, 100) as side:
        serials = []
        for body in bodies:
            started = side.reg.start_parts((body[:3], body[3:]), len(body), 5.0)
            assert started is not None
            serials.append(started[1])
        assert serials == list(range(1, len(bodies) + 1))
        assert len(side.loop._ready) == 1  # type: ignore[attr-defined]  # one flush per tick
        frames = list(_frames_of(side.reg._wbuf, legacy))
        assert [(s, bytes(p)) for s, p in frames] == list(zip(serials, bodies, strict=True))
        assert side.reg.next_deadline == NOW + 5.0
        assert side.reg.stats.requests_sent == len(bodies)


@pytest.mark.parametrize("cls", _classes())
def test_a_plain_answer_resolves_its_call_with_the_business_bytes(cls: type[Any]) -> None:
    with _Side(cls, False, 10) as side:
        started = side.reg.start_parts((b"req",), 3, 1.0)
        assert started is not None
        _, serial, fut = started
        late = 77
        assert side.reg.resolve([(serial, encode_success(2, b"answer")), (late, b"x")]) is None
        assert fut.result() == b"answer"
        assert side.reg._pending == {}
        assert side.reg.stats.responses == 1
        assert side.reg.stats.dropped_responses == 1


@pytest.mark.parametrize("cls", _classes())
def test_no_room_registers_nothing(cls: type[Any]) -> None:
    with _Side(cls, False, 1) as side:
        assert side.reg.start_parts((b"a",), 1, 1.0) is not None
        assert side.reg.start_parts((b"b",), 1, 1.0) is None  # the one slot is busy
        assert side.reg.start_parts((b"c",), 1, 1.0, NOW + 1) is not None  # waited for room
        assert sorted(side.reg._pending) == [1, 2]
        with pytest.raises(LocalProtocolError):
            side.reg.start_parts((b"",), 0, 1.0, NOW + 1)
        assert side.reg._serial == 2


# ---- the send window's count -------------------------------------------------------------------

WINDOW_TWIN: type[Any] = getattr(EXT, "WindowSlots", WindowSlots)


def _window(cls: type[Any], loop: asyncio.AbstractEventLoop, limit: int) -> Any:
    slots = cls()
    slots.limit = limit
    slots.borrowed = 0
    slots._waiters = deque()
    slots._drained = None
    return slots


@settings(max_examples=examples(300), deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=4),
    ops=st.lists(st.sampled_from(["take", "give", "wait", "wait-gone", "drain"]), max_size=40),
)
def test_compiled_window_slots_do_what_the_pure_ones_do(limit: int, ops: list[str]) -> None:
    sides: list[tuple[asyncio.AbstractEventLoop, Any, list[asyncio.Future[None]]]] = []
    for cls in (WindowSlots, WINDOW_TWIN):
        loop = asyncio.new_event_loop()
        sides.append((loop, _window(cls, loop, limit), []))
    try:
        for op in ops:
            seen = []
            for loop, slots, futures in sides:
                got: object = None
                if op == "take":
                    got = slots.try_acquire()
                elif op == "give":
                    if slots.borrowed > 0:
                        slots.release()
                elif op in ("wait", "wait-gone"):
                    waiter = loop.create_future()
                    if op == "wait-gone":
                        waiter.cancel()
                    slots._waiters.append(waiter)
                    futures.append(waiter)
                elif slots._drained is None:
                    slots._drained = loop.create_future()
                    futures.append(slots._drained)
                seen.append(
                    (
                        got,
                        slots.borrowed,
                        len(slots._waiters),
                        slots._drained is None,
                        [f.cancelled() or (f.done() and f.result()) for f in futures],
                        [f.done() for f in futures],
                    )
                )
            assert seen[0] == seen[1], op
    finally:
        for loop, _, _ in sides:
            loop.close()
