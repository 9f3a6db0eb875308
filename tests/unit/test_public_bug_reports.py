"""Public bug reports against aiokafka and the official TubeMQ clients, tried on this SDK's
pieces without a cluster (the FakeCluster ones are in ``tests/fake/test_public_bug_reports.py``).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tubemq_aio.config import HostPort
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.master import MasterInvoker
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.producer.config import ProducerConfig
from tubemq_aio.protocol.rebalance import EventResult, MasterHeartbeatState
from tubemq_aio.protocol.rpc import Method

SILENT_MASTERS = 5


class SilentMasters:
    """Master addresses that accept a request and never answer it: each call fails with
    :class:`RequestTimeoutError` once its ``timeout`` has passed, as the transport's would."""

    def __init__(self) -> None:
        self.tried: list[HostPort] = []

    async def call(self, addr: HostPort, method: Method, body: bytes, timeout: float) -> bytes:
        self.tried.append(addr)
        await asyncio.sleep(timeout)
        raise RequestTimeoutError(f"{addr}: no answer to {method.name} within {timeout} s")


async def test_a_producer_close_at_silent_masters_ends_by_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aio-libs/aiokafka#1101 (``stop()`` hung with the cluster down) in the kind "a timeout
        that is an attempt count, not a deadline": the producer's close at the master gave each
        master address ``min(rpc_timeout, 5)`` seconds, so three silent masters held ``close()``
        15 s. The whole close at the master now ends by that time, however many addresses there
        are (found by this sweep; before, every address here was waited for in turn); the addresses
    are asked staggered within it, so a silent first one does not use it up."""
    masters = tuple(HostPort("127.0.0.1", 18700 + i) for i in range(SILENT_MASTERS))
    silent = SilentMasters()
    config = ProducerConfig(masters=masters, telemetry=False)
    session = ProducerSession(config, MasterInvoker(silent, masters, timeout=0.1))
    session.registered = True
    loop = asyncio.get_running_loop()
    began = loop.time()
    with caplog.at_level(logging.INFO, logger="tubemq_aio"):
        await session.close(timeout=0.1)
    assert loop.time() - began < 0.1 + 1.0  # not one full timeout per address (0.5 s)
    assert silent.tried == list(masters)  # staggered: every address asked once within the time
    assert not session.registered
    assert any("no master answered the producer close" in r.getMessage() for r in caplog.records)


def test_every_processed_event_is_reported_in_order_even_when_they_pile_up() -> None:
    """apache/inlong#11583 (the Go client, item 2): when a second rebalance event was processed
    before the first one's result had been reported, the first was reported again and the
    second lost, so the master waited for it and the group stopped. Results queue up here and
    each heartbeat carries the oldest one not yet reported, once."""
    state = MasterHeartbeatState()
    first = EventResult(1, 1, 2, ())
    second = EventResult(2, 2, 2, ())
    state.add_result(first)
    state.add_result(second)
    assert [state.next_report().event for _ in range(3)] == [first, second, None]
