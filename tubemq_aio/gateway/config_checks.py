"""Value checks of the gateway config: each raises :class:`ConfigError` naming the key."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.consumer_meta import validate_topic_name

__all__ = [
    "check_int",
    "check_name",
    "check_seconds",
    "check_topic",
    "no_unknown",
    "str_tuple",
    "tables",
]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def tables(value: object, key: str) -> list[Mapping[str, Any]]:
    """``value`` as an array of TOML tables (``[[key]]``)."""
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError(f"{key} must be an array of tables ([[{key}]])")
    return value


def str_tuple(value: object, key: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings (from a list or tuple of them)."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings")
    return tuple(value)


def no_unknown(raw: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    """Refuse the first key of ``raw`` not in ``known`` (a typo must not pass silently)."""
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown config key {prefix}{unknown[0]}")


def check_name(value: object, key: str) -> None:
    """A name of 1-64 of ``A-Z a-z 0-9 _ . -``."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigError(f"{key}: {value!r} is not a valid name (1-64 of A-Z a-z 0-9 _ . -)")


def check_topic(value: object, key: str) -> None:
    """A name that is also a valid TubeMQ topic name."""
    check_name(value, key)
    try:
        validate_topic_name(str(value))
    except ConfigError as err:
        raise ConfigError(f"{key}: {err}") from None


def check_int(value: object, key: str, low: int, high: int) -> None:
    """An integer (not a bool) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{key} must be an integer in [{low}, {high}]")


def check_seconds(value: object, key: str, low: float = 0.0) -> None:
    """A finite number of seconds in ``[low, 600]`` (``(0, 600]`` when ``low`` is 0)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not (low <= value <= 600 if low else 0 < value <= 600)
    ):
        span = f"[{low:g}, 600]" if low else "(0, 600]"
        raise ConfigError(f"{key} must be a number of seconds in {span}")
