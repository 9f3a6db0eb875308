"""The send window on its own: slots, arrival order, hand-over, cancellation and draining."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio.producer._window import SendWindow


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_try_acquire_takes_free_slots_only() -> None:
    window = SendWindow(2)
    assert window.try_acquire()
    assert window.try_acquire()
    assert not window.try_acquire()
    assert window.borrowed == 2
    window.release()
    assert window.borrowed == 1
    assert window.try_acquire()


async def test_waiters_get_slots_in_arrival_order_and_newcomers_do_not_overtake() -> None:
    window = SendWindow(1)
    assert window.try_acquire()
    order: list[int] = []

    async def take(i: int) -> None:
        await window.acquire()
        order.append(i)

    tasks = [asyncio.ensure_future(take(i)) for i in range(3)]
    await settle()
    assert window.waiting == 3
    window.release()  # handed to waiter 0, not freed
    assert window.borrowed == 1
    assert not window.try_acquire()  # a newcomer queues behind the waiters
    await settle()
    assert order == [0]
    window.release()
    window.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]
    assert window.borrowed == 1
    assert window.waiting == 0


async def test_a_cancelled_waiter_passes_on_a_slot_handed_to_it() -> None:
    window = SendWindow(1)
    assert window.try_acquire()
    first = asyncio.ensure_future(window.acquire())
    second = asyncio.ensure_future(window.acquire())
    await settle()
    window.release()  # handed to `first` ...
    first.cancel()  # ... which leaves before it runs: the slot goes on to `second`
    with pytest.raises(asyncio.CancelledError):
        await first
    await second
    assert window.borrowed == 1
    assert window.waiting == 0


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    window = SendWindow(1)
    assert window.try_acquire()
    waiter = asyncio.ensure_future(window.acquire())
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert window.waiting == 0
    window.release()
    assert window.borrowed == 0
    assert window.try_acquire()


async def test_drained_waits_until_every_slot_is_back() -> None:
    window = SendWindow(3)
    await window.drained()  # nothing taken: at once
    window.try_acquire()
    window.try_acquire()
    drained = asyncio.ensure_future(window.drained())
    await settle()
    window.release()
    await settle()
    assert not drained.done()
    window.release()
    await asyncio.wait_for(drained, 5)
    assert window.borrowed == 0


async def test_a_cancelled_drain_wait_does_not_break_a_later_one() -> None:
    window = SendWindow(1)
    window.try_acquire()
    first = asyncio.ensure_future(window.drained())
    await settle()
    first.cancel()  # as close_grace running out does
    with pytest.raises(asyncio.CancelledError):
        await first
    later = asyncio.ensure_future(window.drained())
    await settle()
    window.release()
    await asyncio.wait_for(later, 5)
