"""An opt-in periodic statistics line in the log (Java ``StatsConfig`` self-printing).

Java clients print their counters every ``selfPrintPeriodMs`` (6 minutes) unless told not to;
a client here does so only with ``stats_log_interval`` set. Each line names the client and
gives every numeric counter with its change since the previous line, at INFO on the logger
``tubemq_aio.stats``. The task is owned by the client's supervisor and ends on close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

__all__ = ["STATS_LOGGER", "format_stats_line", "log_stats_every"]

#: The logger the lines go to.
STATS_LOGGER = logging.getLogger("tubemq_aio.stats")


def _flatten(values: Mapping[str, object], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested mappings as ``a.b`` keys (bools and texts left out)."""
    flat: dict[str, float] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, key + "."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[key] = value
    return flat


def format_stats_line(what: str, values: Mapping[str, object], last: dict[str, float]) -> str:
    """One line ``what: name=value(+delta) ...`` in name order; ``last`` (the values of the
    previous line, updated here) gives the deltas, none on the first line."""
    flat = _flatten(values)
    parts = []
    for name in sorted(flat):
        value = flat[name]
        text = f"{name}={value:g}"
        if name in last and value != last[name]:
            text += f"({value - last[name]:+g})"
        parts.append(text)
    last.clear()
    last.update(flat)
    return f"{what}: {' '.join(parts)}"


async def log_stats_every(
    interval: float, what: Callable[[], str], values: Callable[[], Mapping[str, object]]
) -> None:
    """Log :func:`format_stats_line` of ``values()`` every ``interval`` seconds until
    cancelled (the client's supervisor cancels it on close)."""
    last: dict[str, float] = {}
    while True:
        await asyncio.sleep(interval)
        STATS_LOGGER.info("%s", format_stats_line(what(), values(), last))
