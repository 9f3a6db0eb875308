"""The consume engine's argument checks, pure (no I/O).

Each check runs on the one dialect, :class:`~tubemq_aio.checks.Checks`, and raises one
:class:`~tubemq_aio.gateway.errors.InvalidRequestError` naming every bad argument of the call,
before the engine touches Redis or TubeMQ. The bounds are those of
:mod:`~tubemq_aio.gateway.config.limits`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tubemq_aio.checks import Checks
from tubemq_aio.gateway.config.limits import MAX_DELAY_MS, MAX_WAIT_MS
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.data import MAX_OFFSET, MIN_RATE
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


def _checks(call: str) -> Checks:
    return Checks(call, error=InvalidRequestError)


def scope_of(spec: GroupSpec, client_id: str | None) -> str:
    """The lease scope of a request: ``c`` in a clustering group, ``b:<client_id>`` in a
    broadcast one."""
    checks = _checks("client_id")
    if spec.mode == "clustering":
        if client_id is not None:
            checks.fail("client_id is not allowed in a clustering group")
        return "c"
    if not isinstance(client_id, str) or not client_id:
        checks.fail("client_id is required in a broadcast group")
    return f"b:{client_id}"


def checked_lease_ms(spec: GroupSpec, lease_ms: int | None) -> int:
    """The lease a request asks for (the group's default when None), within the group's bounds."""
    if lease_ms is None:
        return spec.lease_ms
    checks = _checks("lease_ms")
    checks.integer("lease_ms", lease_ms, low=spec.lease_ms_min, high=spec.lease_ms_max)
    checks.done()
    return lease_ms


def checked_fetch(wait_ms: int, holder: str, owner: str, max_messages: int | None) -> int:
    """Check a fetch's other arguments; returns ``max_messages`` (1 when None)."""
    checks = _checks("fetch")
    checks.integer("wait_ms", wait_ms, low=0, high=MAX_WAIT_MS)
    checks.instance("holder", holder, str)
    checks.instance("owner", owner, str)
    if max_messages is not None:
        checks.integer("max_messages", max_messages, low=1, high=MAX_MESSAGES_LIMIT)
    checks.done()
    return 1 if max_messages is None else max_messages


def checked_settle(action: str, delay_ms: int) -> None:
    """Check a settle's action and delay."""
    checks = _checks("settle")
    checks.choice("action", action, ("ack", "nack", "release"))
    checks.integer("delay_ms", delay_ms, low=0, high=MAX_DELAY_MS)
    checks.done()


def checked_reset(to: object) -> tuple[str, list[tuple[str, int]]]:
    """A reset's target: ``(earliest|latest, [])`` or ``("", [(partition, offset), ...])``."""
    checks = _checks("reset")
    if isinstance(to, str):
        if to not in ("earliest", "latest"):
            checks.fail("to must be 'earliest', 'latest' or {partition: offset}")
        return to, []
    if not isinstance(to, Mapping) or not to:
        checks.fail("to must be 'earliest', 'latest' or {partition: offset}")
    pairs = [
        (str(p), checks.integer(f"offset of {p!r}", off, low=0, high=MAX_OFFSET))
        for p, off in to.items()
    ]
    checks.done()
    return "", pairs


def checked_rate(messages_per_second: float, burst: int | None) -> tuple[float, int]:
    """A consume limit's rate (0 = off) and burst (default: one second's worth, at least 1)."""
    checks = _checks("rate")
    rate = checks.number("messages_per_second", messages_per_second, low=0.0, high=math.inf)
    if checks.ok and 0 < rate < MIN_RATE:
        checks.problem(f"messages_per_second must be 0 (off) or >= {MIN_RATE}")
    if burst is not None:
        checks.integer("burst", burst, low=0)
    checks.done()
    return rate, max(1, burst or math.ceil(rate))
