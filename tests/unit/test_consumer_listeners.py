"""The consumers' ``on_assigned`` / ``on_revoked`` runner: sync and async callbacks, failures,
time limit, cancellation, and the checks at construction."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from tubemq_aio import ClientBalancedConsumer, ConfigError, Consumer
from tubemq_aio.consumer._listeners import notify

M = "127.0.0.1:8715"


async def test_a_plain_function_is_called_with_the_keys() -> None:
    seen: list[list[str]] = []
    await notify(seen.append, ["1:t:0"], what="on_assigned", timeout=5.0)
    assert seen == [["1:t:0"]]


async def test_a_coroutine_function_is_awaited_to_its_end() -> None:
    steps: list[str] = []

    async def callback(keys: list[str]) -> None:
        steps.append("started")
        await asyncio.sleep(0)
        steps.append("finished " + ",".join(keys))

    await notify(callback, ["1:t:0", "1:t:1"], what="on_revoked", timeout=5.0)
    assert steps == ["started", "finished 1:t:0,1:t:1"]


async def test_none_is_nothing_to_do() -> None:
    await notify(None, ["1:t:0"], what="on_assigned", timeout=5.0)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_exception_is_logged_not_raised(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    def failing(keys: list[str]) -> None:
        raise ValueError("boom")

    async def failing_async(keys: list[str]) -> None:
        raise ValueError("boom")

    callback = failing if kind == "sync" else failing_async
    with caplog.at_level(logging.ERROR, logger="tubemq_aio.consumer"):
        await notify(callback, ["1:t:0"], what="on_assigned", timeout=5.0)
    (record,) = caplog.records
    assert "on_assigned callback" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)


async def test_a_slow_callback_is_cancelled_after_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcome: list[str] = []

    async def slow(keys: list[str]) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    with caplog.at_level(logging.WARNING, logger="tubemq_aio.consumer"):
        await notify(slow, ["1:t:0"], what="on_revoked", timeout=0.05)
    assert outcome == ["cancelled"]
    assert "did not finish within" in caplog.text


async def test_a_timeout_error_of_the_callback_itself_is_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def own_timeout(keys: list[str]) -> None:
        raise TimeoutError("the callback's own")

    with caplog.at_level(logging.ERROR, logger="tubemq_aio.consumer"):
        await notify(own_timeout, ["1:t:0"], what="on_assigned", timeout=5.0)
    assert "on_assigned callback" in caplog.text
    assert "did not finish" not in caplog.text


async def test_cancelling_the_caller_cancels_an_awaited_callback() -> None:
    entered = asyncio.Event()
    outcome: list[str] = []

    async def slow(keys: list[str]) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    task = asyncio.create_task(notify(slow, ["1:t:0"], what="on_assigned", timeout=60.0))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome == ["cancelled"]


@pytest.mark.parametrize("cls", [Consumer, ClientBalancedConsumer])
@pytest.mark.parametrize("name", ["on_assigned", "on_revoked"])
def test_a_callback_that_is_not_callable_is_refused(cls: type[Consumer], name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a callable or None, got int"):
        cls(M, group="gg", topics=["t"], **{name: 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, "5", True])
def test_callback_timeout_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match="callback_timeout"):
        Consumer(M, group="gg", topics=["t"], callback_timeout=value)  # type: ignore[arg-type]


def test_callbacks_are_kept_on_the_consumer() -> None:
    def assigned(keys: list[str]) -> None:
        """A plain callback."""

    async def revoked(keys: list[str]) -> None:
        """An async callback."""

    consumer = ClientBalancedConsumer(
        M, group="gg", topics=["t"], on_assigned=assigned, on_revoked=revoked
    )
    assert consumer.on_assigned is assigned
    assert consumer.on_revoked is revoked
    assert consumer.config.callback_timeout == 10.0
