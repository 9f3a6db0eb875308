"""One optional TOML table of the gateway config, checked before its dataclass is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tubemq_aio.errors import ConfigError

__all__ = ["checked_table"]


def checked_table(raw: object, name: str, known: frozenset[str]) -> dict[str, Any]:
    """``raw`` (the parsed ``[name]`` table) as a dict of its keys.

    Raises:
        ConfigError: ``raw`` is not a table, or has a key not in ``known``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{name} must be a table ([{name}])")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown config key {name}.{unknown[0]}")
    return dict(raw)
