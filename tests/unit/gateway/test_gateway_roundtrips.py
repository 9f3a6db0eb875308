"""The store's round trips: what Redis trouble becomes for a client (503 store_unavailable
for an outage or a failover in progress, GatewayError for a refusal), one retry, scripts
loaded again after NOSCRIPT, and an AttributeError of ours never mistaken for an outage."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc

from tubemq_aio.gateway.errors import GatewayError, StoreUnavailableError
from tubemq_aio.gateway.leases.roundtrips import RoundTrips


class Loader(RoundTrips):
    """Round trips that remember the scripts loaded again."""

    loaded = 0

    async def _load_scripts(self) -> None:
        self.loaded += 1


def failing(*errors: BaseException, then: Any = "ok") -> Callable[[], Awaitable[Any]]:
    """A call that raises ``errors`` one per attempt, then answers ``then``."""
    left = list(errors)

    async def call() -> Any:
        if left:
            raise left.pop(0)
        return then

    return call


@pytest.fixture
def trips() -> Loader:
    return Loader(aioredis.Redis(port=9), timeout=1.0)


async def test_a_lost_connection_is_retried_once_then_unavailable(trips: Loader) -> None:
    assert await trips.roundtrip(failing(rexc.ConnectionError("x"))) == "ok"
    with pytest.raises(StoreUnavailableError):
        await trips.roundtrip(failing(rexc.ConnectionError("x"), rexc.TimeoutError("y")))
    assert (trips.roundtrips, trips.failures) == (4, 1)


@pytest.mark.parametrize(
    "error",
    [
        rexc.ClusterDownError("CLUSTERDOWN"),
        rexc.TryAgainError("TRYAGAIN"),
        rexc.ReadOnlyError("READONLY"),
        rexc.SlotNotCoveredError("no node"),
        rexc.ResponseError("LOADING Redis is loading"),
        rexc.ResponseError("BUSY Redis is busy running a script"),
    ],
)
async def test_a_failover_in_progress_is_unavailable(trips: Loader, error: Exception) -> None:
    with pytest.raises(StoreUnavailableError):
        await trips.roundtrip(failing(error))


async def test_noscript_loads_the_scripts_and_retries(trips: Loader) -> None:
    assert await trips.roundtrip(failing(rexc.NoScriptError("gone"))) == "ok"
    assert trips.loaded == 1
    with pytest.raises(GatewayError, match="lost the gateway scripts"):
        await trips.roundtrip(failing(rexc.NoScriptError("a"), rexc.NoScriptError("b")))


async def test_a_refusal_is_a_gateway_error_not_an_outage(trips: Loader) -> None:
    with pytest.raises(GatewayError, match="refused") as caught:
        await trips.roundtrip(failing(rexc.ResponseError("WRONGTYPE")))
    assert not isinstance(caught.value, StoreUnavailableError)


async def test_only_redis_py_closing_a_connection_under_us_counts_as_lost(trips: Loader) -> None:
    with pytest.raises(AttributeError):  # a bug of ours stays a bug
        await trips.roundtrip(failing(AttributeError("no such method")))
    where = os.path.join(os.sep, "site-packages", "redis", "asyncio", "connection.py")
    namespace: dict[str, Any] = {}
    code = "async def send(writer):\n    writer.writelines([b'x'])\n"
    exec(compile(code, where, "exec"), namespace)  # a frame that looks like redis-py's own
    with pytest.raises(StoreUnavailableError):
        await trips.roundtrip(lambda: namespace["send"](None))
