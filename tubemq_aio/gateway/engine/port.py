"""The seam between the HTTP layer and the consume engine (``ConsumeService``).

The routes see the engine only through :class:`ConsumeEngine`, so the HTTP layer can be tested
against a small in-memory stand-in and mounted on the Redis/TubeMQ engine unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from tubemq_aio.models import Message

__all__ = ["ConsumeEngine", "FetchOutcomeLike", "LeaseLike", "LeaseRefLike", "PiggybackAcks"]

SettleAction = Literal["ack", "nack", "release"]


class LeaseRefLike(Protocol):
    """What a verified lease token carries."""

    @property
    def group(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def partition_key(self) -> str: ...
    @property
    def lease_id(self) -> str: ...


class LeaseLike(LeaseRefLike, Protocol):
    """A lease granted by a fetch."""

    @property
    def expires_at_ms(self) -> int: ...
    @property
    def redelivery(self) -> int: ...


class FetchOutcomeLike(Protocol):
    """The result of one fetch."""

    @property
    def status(self) -> str: ...
    @property
    def lease(self) -> LeaseLike | None: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def retry_after_ms(self) -> int | None: ...
    @property
    def position(self) -> Any: ...


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

    refs: tuple[Any, ...]
    results: list[str | Exception] | None = None

    @property
    def pending(self) -> bool:
        """Whether there are refs that no one settled yet."""
        return self.results is None and bool(self.refs)


class ConsumeEngine(Protocol):
    """The consume engine as the HTTP layer uses it (see the gateway interface note)."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def fetch(
        self,
        group: str,
        *,
        client_id: str | None,
        wait_ms: int = 0,
        lease_ms: int | None = None,
        holder: str = "",
        max_messages: int | None = None,
        owner: str = "",
        acks: PiggybackAcks | None = None,
    ) -> FetchOutcomeLike: ...
    async def settle(self, lease: Any, action: SettleAction, *, delay_ms: int = 0) -> str: ...
    async def extend(self, lease: Any, lease_ms: int) -> int: ...
    async def reset(
        self,
        group: str,
        to: Literal["earliest", "latest"] | Mapping[str, int] | datetime,
        *,
        client_id: str | None = None,
    ) -> Sequence[Any]: ...
    async def pause(self, group: str) -> None: ...
    async def resume(self, group: str) -> None: ...
    async def set_rate(self, group: str, messages_per_second: float, burst: int | None) -> None: ...
    async def lag(self, group: str, *, client_id: str | None = None) -> Any: ...
    async def readiness(self) -> Mapping[str, bool]: ...
    def stats(self) -> Any: ...
