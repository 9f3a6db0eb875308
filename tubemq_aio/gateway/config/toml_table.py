"""One optional TOML table of the gateway config, checked before its dataclass is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tubemq_aio.checks import Checks
from tubemq_aio.gateway.config.value_checks import no_unknown

__all__ = ["checked_table"]


def checked_table(raw: object, name: str, known: frozenset[str]) -> dict[str, Any]:
    """``raw`` (the parsed ``[name]`` table) as a dict of its keys.

    Raises:
        ConfigError: ``raw`` is not a table, or has keys not in ``known`` (all of them named).
    """
    checks = Checks(name)
    if not isinstance(raw, Mapping):
        checks.fail(f"{name} must be a table ([{name}])")
    no_unknown(checks, raw, known, f"{name}.")
    checks.done()
    return dict(raw)
