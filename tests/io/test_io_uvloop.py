"""The connection scenarios again, on uvloop (its transports are not asyncio.Transport)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import test_io_connection as tc
import uvloop
from echo_server import FakeServer

from tubemq_aio._io.settings import TransportSettings

SCENARIOS: list[Callable[..., Awaitable[None]]] = [
    tc.test_10k_pipelined_calls_with_random_response_order,
    tc.test_timeout_fails_call_and_keeps_connection,
    tc.test_cancel_mid_flight_drops_late_reply,
    tc.test_server_close_mid_flight_fails_all_pending_fast,
    tc.test_in_flight_bound_makes_callers_wait,
    tc.test_pause_writing_blocks_senders,
    tc.test_garbage_from_server_closes_connection,
    tc.test_close_fails_pending_with_client_closed,
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__.removeprefix("test_"))
def test_scenario_on_uvloop(scenario: Callable[..., Awaitable[None]]) -> None:
    async def main() -> None:
        server = await FakeServer().start()
        kwargs: dict[str, Any] = {"server": server}
        if "settings" in inspect.signature(scenario).parameters:
            kwargs["settings"] = TransportSettings(sweep_interval=0.01, connect_timeout=1.0)
        try:
            await scenario(**kwargs)
        finally:
            await server.stop()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
