"""The consume engine's argument checks, pure (no I/O).

Each check raises :class:`~tubemq_aio.gateway.errors.InvalidRequestError` naming the argument,
before the engine touches Redis or TubeMQ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tubemq_aio.gateway.engine.data import MAX_OFFSET, MIN_RATE, GroupSpec
from tubemq_aio.gateway.errors import InvalidRequestError

__all__ = [
    "MAX_MESSAGES_LIMIT",
    "checked_fetch",
    "checked_lease_ms",
    "checked_rate",
    "checked_reset",
    "checked_settle",
    "scope_of",
]

#: The largest ``max_messages`` a fetch may ask for.
MAX_MESSAGES_LIMIT = 10_000


def scope_of(spec: GroupSpec, client_id: str | None) -> str:
    """The lease scope of a request: ``c`` in a clustering group, ``b:<client_id>`` in a
    broadcast one."""
    if spec.mode == "clustering":
        if client_id is not None:
            raise InvalidRequestError("client_id is not allowed in a clustering group")
        return "c"
    if not isinstance(client_id, str) or not client_id:
        raise InvalidRequestError("client_id is required in a broadcast group")
    return f"b:{client_id}"


def checked_lease_ms(spec: GroupSpec, lease_ms: int | None) -> int:
    """The lease a request asks for (the group's default when None), within the group's bounds."""
    if lease_ms is None:
        return spec.lease_ms
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, int):
        raise InvalidRequestError("lease_ms must be an integer")
    if not spec.lease_ms_min <= lease_ms <= spec.lease_ms_max:
        raise InvalidRequestError(f"lease_ms must be in [{spec.lease_ms_min}, {spec.lease_ms_max}]")
    return lease_ms


def checked_fetch(wait_ms: int, holder: str, owner: str, max_messages: int | None) -> int:
    """Check a fetch's other arguments; returns ``max_messages`` (1 when None)."""
    if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or not 0 <= wait_ms <= 30000:
        raise InvalidRequestError("wait_ms must be an integer in [0, 30000]")
    if not isinstance(holder, str) or not isinstance(owner, str):
        raise InvalidRequestError("holder and owner must be strings")
    if max_messages is None:
        return 1
    if (
        isinstance(max_messages, bool)
        or not isinstance(max_messages, int)
        or not 1 <= max_messages <= MAX_MESSAGES_LIMIT
    ):
        raise InvalidRequestError(f"max_messages must be an integer in [1, {MAX_MESSAGES_LIMIT}]")
    return max_messages


def checked_settle(action: str, delay_ms: int) -> None:
    """Check a settle's action and delay."""
    if action not in ("ack", "nack", "release"):
        raise InvalidRequestError("action must be ack, nack or release")
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int):
        raise InvalidRequestError("delay_ms must be an integer")
    if not 0 <= delay_ms <= 3_600_000:
        raise InvalidRequestError("delay_ms must be in [0, 3600000]")


def checked_reset(to: object) -> tuple[str, list[tuple[str, int]]]:
    """A reset's target: ``(earliest|latest, [])`` or ``("", [(partition, offset), ...])``."""
    if isinstance(to, str):
        if to not in ("earliest", "latest"):
            raise InvalidRequestError("to must be 'earliest', 'latest' or {partition: offset}")
        return to, []
    if not isinstance(to, Mapping) or not to:
        raise InvalidRequestError("to must be 'earliest', 'latest' or {partition: offset}")
    pairs: list[tuple[str, int]] = []
    for p, off in to.items():
        if isinstance(off, bool) or not isinstance(off, int) or not 0 <= off <= MAX_OFFSET:
            raise InvalidRequestError(f"offset of {p!r} must be an integer in [0, {MAX_OFFSET}]")
        pairs.append((str(p), off))
    return "", pairs


def checked_rate(messages_per_second: float, burst: int | None) -> tuple[float, int]:
    """A consume limit's rate (0 = off) and burst (default: one second's worth, at least 1)."""
    rate = messages_per_second
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        raise InvalidRequestError("messages_per_second must be a finite number")
    if rate < 0 or 0 < rate < MIN_RATE:
        raise InvalidRequestError(f"messages_per_second must be 0 (off) or >= {MIN_RATE}")
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 0):
        raise InvalidRequestError("burst must be an integer >= 0")
    return float(rate), max(1, burst or math.ceil(rate))
