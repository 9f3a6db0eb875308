"""The seam between the HTTP layer and the consume engine (``ConsumeService``).

The routes see the engine only through :class:`ConsumeEngine`, so the HTTP layer can be tested
against a small in-memory stand-in and mounted on the Redis/TubeMQ engine unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.engine.data import (
    FetchOutcome,
    FetchQuery,
    GatewayStats,
    LagReport,
    ResetEntry,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey

__all__ = ["ConsumeEngine", "PiggybackAcks", "SettleAction", "SettleResult"]

SettleAction = Literal["ack", "nack", "release"]
SettleResult = Literal["acked", "already_acked", "nacked", "released"]


@dataclass(slots=True)
class PiggybackAcks:
    """The acks a fetch carries (``"ack": [tokens]``), verified by the HTTP layer.

    An engine may settle them together with the fetch's first Redis round trip; it then sets
    ``results`` (per ref, in order: ``"acked"`` / ``"already_acked"`` or the error that ack
    raised). Whatever is still ``pending`` when the fetch ends is settled one by one with
    :meth:`ConsumeEngine.settle`.

    Attributes:
        refs: the leases to ack.
        results: their outcomes once settled (None before).
    """

    refs: tuple[LeaseKey, ...]
    results: list[str | Exception] | None = None

    @property
    def pending(self) -> bool:
        """Whether there are refs that no one settled yet."""
        return self.results is None and bool(self.refs)

    async def settle_each(self, ack: Callable[[LeaseKey], Awaitable[str]]) -> None:
        """Ack the refs one by one with ``ack`` (when no round trip could carry them); each
        gets its answer or the :class:`TubeMQError` its ack raised."""
        results: list[str | Exception] = []
        for ref in self.refs:
            try:
                results.append(await ack(ref))
            except TubeMQError as exc:
                results.append(exc)
        self.results = results


class ConsumeEngine(Protocol):
    """The consume engine as the HTTP layer uses it (``ConsumeService``; see the gateway
    interface note). It speaks the engine's own types."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def fetch(
        self, query: FetchQuery, *, acks: PiggybackAcks | None = None
    ) -> FetchOutcome: ...
    async def settle(
        self, lease: LeaseKey, action: SettleAction, *, delay_ms: int = 0
    ) -> SettleResult: ...
    async def extend(self, lease: LeaseKey, lease_ms: int) -> int: ...
    async def reset(
        self,
        group: str,
        to: Literal["earliest", "latest"] | Mapping[str, int] | datetime,
        *,
        client_id: str | None = None,
    ) -> list[ResetEntry]: ...
    async def pause(self, group: str) -> None: ...
    async def resume(self, group: str) -> None: ...
    async def set_rate(self, group: str, messages_per_second: float, burst: int | None) -> None: ...
    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport: ...
    async def readiness(self, within: float) -> Mapping[str, bool]: ...
    def hints(self) -> Mapping[str, str]: ...
    def stats(self) -> GatewayStats: ...
    def drain(self) -> None: ...
