"""Stand-ins shared by the producer attempt tests: a send answer, a pool with no open connection,
and a connection registry with its fields filled as the connection fills them."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from functools import partial
from typing import Any

from tubemq_aio._io import registry
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.rpc import success_bounds

__all__ = ["REGISTRY_NOW", "StandInPool", "answer", "filled_registry"]

#: The clock of a :func:`filled_registry` (loop seconds).
REGISTRY_NOW = 100.0


def answer(code: int = 200) -> bytes:
    return broker_pb.SendMessageResponseB2P(
        success=code == 200, errCode=code, errMsg="OK", messageId=7, appendTime=1, appendOffset=0
    ).SerializeToString()


class StandInPool:
    """No connection is open (``ready`` is None); every broker's reconnect backoff lasts
    ``retry_after`` seconds."""

    def __init__(self) -> None:
        self.retry_after = 0.0

    def ready(self, address: object) -> None:
        return None

    def retry_in(self, address: object) -> float:
        return self.retry_after


def filled_registry(
    cls: type[Any], loop: asyncio.AbstractEventLoop, legacy: bool, room: int
) -> Any:
    """A registry with its fields filled as ``PendingCalls.__init__`` fills them."""
    reg = cls()
    reg.label = "10.0.0.1:8123"
    reg.stats = TransportStats()
    reg.next_deadline = math.inf
    reg.last_activity = 0.0
    reg._loop = loop
    reg._new_future = partial(asyncio.Future, loop=loop)
    reg._clock = lambda: REGISTRY_NOW
    reg._pending = {}
    reg._raw = set()
    reg._serial = 0
    reg._written = 0
    reg._max_in_flight = room
    reg._room_waiters = deque()
    reg._paused = False
    reg._closed = None
    reg._legacy = legacy
    reg._wbuf = []
    reg._tick_bytes = 0
    reg._write_high = 600  # a few requests a tick: the property tests meet the early write
    reg._frame_other = registry.frame_other
    reg._settle_other = registry.settle_other
    reg._success_bounds = success_bounds
    return reg
