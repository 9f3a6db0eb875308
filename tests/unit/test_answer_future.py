"""The compiled answer future (``AnswerFutures``/``AnswerFuture``, ``_speedups/_answer_future.pxi``)
keeps ``asyncio.Future``'s contract: every test runs on both, on asyncio's loop and on uvloop,
so asyncio's own future is the reference for each outcome. Then what only the compiled one
does: the wake-ups of one read's answers run in one loop callback, in order, each in its own
context.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import uvloop

from tests.support.speedup_impls import EXT
from tubemq_aio import accelerator
from tubemq_aio._io.pending import PendingCalls, future_factory
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.protocol.rpc import encode_success

NewFuture = Callable[[], Any]

#: The connection runs on the compiled registry (built, and not forced pure).
_IN_USE = accelerator.compiled() is not None
_KINDS = [
    (loop, future)
    for loop in ("asyncio", "uvloop")
    for future in ("asyncio", "compiled")
    if future == "asyncio" or EXT is not None
]
_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("answer_future_test", default="-")


@pytest.fixture(params=_KINDS, ids=["-".join(kind) for kind in _KINDS])
def loop_and_new(request: pytest.FixtureRequest) -> Iterator[tuple[asyncio.AbstractEventLoop, Any]]:
    """A loop (not running) and what makes futures of the kind under test on it."""
    loop_kind, future_kind = request.param
    loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
    if future_kind == "asyncio":
        new: NewFuture = partial(asyncio.Future, loop=loop)
    else:
        assert EXT is not None
        new = EXT.AnswerFutures(loop).new
    try:
        yield loop, new
    finally:
        loop.close()


def _run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(coro)


def _turn(loop: asyncio.AbstractEventLoop) -> None:
    """Run the callbacks ready now (one loop turn)."""
    _run(loop, asyncio.sleep(0))


def _reported(loop: asyncio.AbstractEventLoop) -> list[dict[str, Any]]:
    """The contexts ``loop``'s exception handler will be given, from now on."""
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    return reported


def test_states_results_and_errors(loop_and_new: tuple[asyncio.AbstractEventLoop, Any]) -> None:
    loop, new = loop_and_new
    fut = new()
    assert fut.get_loop() is loop
    assert asyncio.isfuture(fut)
    assert not fut.done()
    assert not fut.cancelled()
    with pytest.raises(asyncio.InvalidStateError):
        fut.result()
    with pytest.raises(asyncio.InvalidStateError):
        fut.exception()
    fut.set_result(b"ok")
    assert fut.done()
    assert not fut.cancelled()
    assert fut.result() == b"ok"
    assert fut.exception() is None
    with pytest.raises(asyncio.InvalidStateError):
        fut.set_result(b"again")
    with pytest.raises(asyncio.InvalidStateError):
        fut.set_exception(ValueError())
    assert fut.cancel() is False

    failed = new()
    failed.set_exception(KeyError)  # a class is instantiated
    assert isinstance(failed.exception(), KeyError)
    with pytest.raises(KeyError):
        failed.result()
    with pytest.raises(TypeError):
        new().set_exception("not an exception")


class _Stop(StopIteration):
    """A StopIteration of another type (asyncio refuses only the exact type before 3.13)."""


@pytest.mark.parametrize("stop_type", [StopIteration, _Stop])
def test_a_stop_iteration_is_refused_or_wrapped_as_asyncio_does_on_this_python(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any], stop_type: type[StopIteration]
) -> None:
    # Before 3.13 asyncio's future refuses an exact StopIteration with TypeError; from 3.13 on
    # it stores a RuntimeError caused by any StopIteration.
    _, new = loop_and_new
    stop = stop_type()
    fut = new()
    if sys.version_info >= (3, 13):
        fut.set_exception(stop)
        wrapped = fut.exception()
        assert type(wrapped) is RuntimeError
        assert wrapped.__cause__ is stop
        assert wrapped.__context__ is stop
    elif stop_type is StopIteration:
        with pytest.raises(TypeError):
            fut.set_exception(stop)
        assert not fut.done()
    else:
        fut.set_exception(stop)
        assert fut.exception() is stop


def test_cancel_with_and_without_message(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    _, new = loop_and_new
    fut = new()
    assert fut.cancel("why") is True
    assert fut.cancelled()
    assert fut.done()
    assert fut.cancel() is False
    with pytest.raises(asyncio.CancelledError) as info:
        fut.result()
    assert info.value.args == ("why",)
    with pytest.raises(asyncio.CancelledError):
        fut.exception()
    with pytest.raises(asyncio.InvalidStateError):
        fut.set_result(1)
    plain = new()
    plain.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        plain.result()
    assert info.value.args == ()


def test_callbacks_run_later_in_order_and_in_their_context(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new
    fut = new()
    seen: list[tuple[str, str]] = []
    ctx = contextvars.copy_context()
    ctx.run(_VAR.set, "theirs")
    fut.add_done_callback(lambda f: seen.append(("first", _VAR.get())))
    fut.add_done_callback(lambda f: seen.append(("second", _VAR.get())), context=ctx)
    third = lambda f: seen.append(("third", _VAR.get()))  # noqa: E731
    fut.add_done_callback(third)
    fut.add_done_callback(third)
    assert fut.remove_done_callback(third) == 2
    assert fut.remove_done_callback(third) == 0
    fourth = lambda f: seen.append(("fourth", str(f.result())))  # noqa: E731
    fut.add_done_callback(fourth)
    fut.set_result(4)
    assert seen == []  # scheduled, never run inline
    assert fut.remove_done_callback(fourth) == 0  # scheduled already: it still runs
    _turn(loop)
    assert seen == [("first", "-"), ("second", "theirs"), ("fourth", "4")]
    # Added once done: scheduled with call_soon, not run inline.
    fut.add_done_callback(lambda f: seen.append(("late", "-")))
    assert seen[-1] != ("late", "-")
    _turn(loop)
    assert seen[-1] == ("late", "-")
    assert fut.remove_done_callback(third) == 0


def test_removing_the_first_callback_keeps_the_order(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new
    fut = new()
    seen: list[str] = []
    first = lambda f: seen.append("a")  # noqa: E731
    fut.add_done_callback(first)
    fut.add_done_callback(lambda f: seen.append("b"))
    assert fut.remove_done_callback(first) == 1
    fut.add_done_callback(lambda f: seen.append("c"))
    fut.cancel()
    _turn(loop)
    assert seen == ["b", "c"]


def test_an_exception_in_a_callback_is_reported_and_the_others_run(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new
    reported = _reported(loop)
    fut = new()
    seen: list[int] = []

    def boom(f: Any) -> None:
        raise RuntimeError("boom")

    fut.add_done_callback(boom)
    fut.add_done_callback(lambda f: seen.append(1))
    fut.set_result(None)
    _turn(loop)
    assert seen == [1]
    assert [type(c["exception"]) for c in reported] == [RuntimeError]


def test_awaited_by_a_task(loop_and_new: tuple[asyncio.AbstractEventLoop, Any]) -> None:
    loop, new = loop_and_new

    async def main() -> tuple[Any, Any]:
        done = new()
        loop.call_soon(done.set_result, b"answer")
        failed = new()
        loop.call_soon(failed.set_exception, ConnectionError("lost"))
        with pytest.raises(ConnectionError):
            await failed
        ready = new()
        ready.set_result(3)
        return await done, await ready

    assert _run(loop, main()) == (b"answer", 3)


def test_a_task_cancelled_while_awaiting_cancels_the_future(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new
    fut = new()
    cleanup: list[str] = []

    async def waiter() -> None:
        try:
            await fut
        except asyncio.CancelledError:
            cleanup.append("abandoned")
            raise

    async def main() -> None:
        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        assert task.cancel("stop") is True
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        assert info.value.args == ("stop",)

    _run(loop, main())
    assert fut.cancelled()
    assert cleanup == ["abandoned"]


def test_with_wait_for_shield_gather_wait_timeout_and_taskgroup(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new

    async def main() -> None:
        slow = new()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slow, 0.001)
        assert slow.cancelled()

        quick = new()
        loop.call_soon(quick.set_result, 1)
        assert await asyncio.wait_for(quick, 5) == 1

        inner = new()
        outer = asyncio.ensure_future(asyncio.shield(inner))
        await asyncio.sleep(0)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert not inner.cancelled()
        inner.set_result(2)
        assert await inner == 2

        a, b = new(), new()
        loop.call_soon(a.set_result, "a")
        loop.call_soon(b.set_exception, ValueError("b"))
        outcomes = await asyncio.gather(a, b, return_exceptions=True)
        assert list(outcomes) == ["a", b.exception()]

        c, d = new(), new()
        gathered = asyncio.gather(c, d)
        await asyncio.sleep(0)
        gathered.cancel("all")
        with pytest.raises(asyncio.CancelledError):
            await gathered
        assert c.cancelled()
        assert d.cancelled()

        e, f = new(), new()
        loop.call_soon(e.set_result, 5)
        finished, waiting = await asyncio.wait([e, f], return_when=asyncio.FIRST_COMPLETED)
        assert finished == {e}
        assert waiting == {f}
        f.cancel()

        never = new()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.001):
                await never
        assert never.cancelled()

        g, h = new(), new()

        async def take(fut: Any) -> Any:
            return await fut

        async with asyncio.TaskGroup() as group:
            tg, th = group.create_task(take(g)), group.create_task(take(h))
            loop.call_soon(g.set_result, "g")
            loop.call_soon(h.set_result, "h")
        assert (tg.result(), th.result()) == ("g", "h")

    _run(loop, main())


def test_an_exception_never_retrieved_is_reported(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    loop, new = loop_and_new
    reported = _reported(loop)
    fut = new()
    fut.set_exception(ValueError("lost"))
    del fut
    retrieved = new()
    retrieved.set_exception(ValueError("seen"))
    retrieved.exception()
    del retrieved
    gc.collect()
    assert [str(c["exception"]) for c in reported] == ["lost"]
    assert "never retrieved" in reported[0]["message"]


def _record(order: list[tuple[int, str]], i: int, fut: Any) -> None:
    order.append((i, _VAR.get()))


def test_one_reads_answers_wake_in_one_callback_in_order() -> None:
    # Compiled: every call one read answers is woken by ONE loop callback, in the order the
    # read resolved them, each callback in its own context; none runs inside the read. Pure
    # (asyncio's futures): the same order and contexts, one loop callback per call.
    loop = asyncio.new_event_loop()
    order: list[tuple[int, str]] = []

    async def main() -> None:
        calls = PendingCalls("10.0.0.1:8123", TransportSettings())
        made = type(calls._new_future())
        assert made.__name__ == "AnswerFuture" if _IN_USE else made is asyncio.Future
        started = []
        for _ in range(3):
            one = calls.start_parts((b"x",), 1, 5.0)
            assert one is not None
            started.append(one)
        futures = []
        callbacks = []
        for i, (_, _, fut) in enumerate(started):
            ctx = contextvars.copy_context()
            ctx.run(_VAR.set, f"caller{i}")
            callbacks.append(partial(_record, order, i))
            fut.add_done_callback(callbacks[-1], context=ctx)
            futures.append(fut)
        handles_before = len(loop._ready)  # type: ignore[attr-defined]
        frames = [(one[1], encode_success(1, b"ok%d" % one[1])) for one in reversed(started)]
        assert calls.resolve(frames) is None
        assert order == []
        # Done: its callback is scheduled (in the batch), as asyncio's would be with the loop.
        assert futures[1].remove_done_callback(callbacks[1]) == 0
        woken = 1 if _IN_USE else len(started)
        assert len(loop._ready) == handles_before + woken  # type: ignore[attr-defined]
        await asyncio.sleep(0)
        assert order == [(2, "caller2"), (1, "caller1"), (0, "caller0")]
        assert [f.result() for f in futures] == [b"ok1", b"ok2", b"ok3"]
        calls._flush()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


class _OwnFutures(asyncio.SelectorEventLoop):
    """A loop that makes its futures its own way."""

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)


def test_a_loop_with_its_own_create_future_keeps_it() -> None:
    loop = _OwnFutures()
    try:
        assert future_factory(loop) == loop.create_future
    finally:
        loop.close()


@pytest.mark.skipif(EXT is None, reason="the accelerator is not built")
@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_the_factory_makes_answer_futures_on_asyncio_and_uvloop_only_when_compiled(
    monkeypatch: pytest.MonkeyPatch, loop_kind: str
) -> None:
    loop = uvloop.new_event_loop() if loop_kind == "uvloop" else asyncio.new_event_loop()
    try:
        monkeypatch.delenv(accelerator.ENV_PURE, raising=False)
        assert type(future_factory(loop)()).__name__ == "AnswerFuture"
        monkeypatch.setenv(accelerator.ENV_PURE, "1")
        assert type(future_factory(loop)()) is asyncio.Future
    finally:
        loop.close()


def test_the_registry_reads_the_monotonic_clock_as_time_monotonic() -> None:
    # On asyncio's loop the connection's clock is time.monotonic, which the compiled registry
    # reads without calling it: a call's deadline is its timeout after a reading of that clock
    # (the pure registry calls it: the same deadline).
    loop = asyncio.new_event_loop()

    async def main() -> None:
        calls = PendingCalls("10.0.0.1:8123", TransportSettings())
        assert calls._clock is time.monotonic
        before = time.monotonic()
        started = calls.start_parts((b"x",), 1, 5.0)
        after = time.monotonic()
        assert started is not None
        _, deadline, _ = calls._pending[started[1]]
        assert before + 5.0 <= deadline <= after + 5.0
        assert calls.stats.requests_sent == 1
        calls._flush()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_each_raise_of_an_exception_starts_from_its_traceback(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    # Found by an adversarial review: the compiled future re-raised its exception as is, so
    # every result() (and every await of it) added its frames to the same traceback.
    _, new = loop_and_new
    fut = new()
    fut.set_exception(ValueError("once"))
    lengths = []
    for _ in range(3):
        with pytest.raises(ValueError, match="once") as raised:
            fut.result()
        lengths.append(len(traceback.extract_tb(raised.value.__traceback__)))
    assert lengths == [lengths[0]] * 3


def test_repr_is_asyncios_with_a_long_result_shortened(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    # Found by an adversarial review: the compiled future printed its whole result (a
    # GetMessage answer can be megabytes) in its repr, which goes into log lines such as
    # "Exception in callback ...(<future>)", and its states in capitals.
    loop, new = loop_and_new
    pairs: list[tuple[Any, asyncio.Future[Any]]] = [
        (new(), asyncio.Future(loop=loop)) for _ in range(4)
    ]
    for fut in pairs[1]:
        fut.set_result(b"x" * 1_000_000)
    for fut in pairs[2]:
        fut.set_exception(KeyError("k"))
        fut.exception()
    for fut in pairs[3]:
        fut.cancel()
    for fut, reference in pairs:
        assert repr(fut) == repr(reference).replace("<Future", f"<{type(fut).__name__}", 1)
    assert len(repr(pairs[1][0])) < 100


def test_a_cancelled_future_is_freed_without_the_cycle_collector(
    loop_and_new: tuple[asyncio.AbstractEventLoop, Any],
) -> None:
    # Found by an adversarial review: the compiled future kept the CancelledError it raised,
    # whose traceback holds the awaiting coroutine's frames, which hold the future: every
    # cancelled call's future, frames and locals waited for the cycle collector.
    loop, new = loop_and_new

    async def wait(fut: Any) -> None:
        await fut

    async def main() -> weakref.ref[Any]:
        fut = new()
        task = loop.create_task(wait(fut))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return weakref.ref(fut)

    gc.disable()
    try:
        ref = _run(loop, main())
        assert ref() is None
    finally:
        gc.enable()
