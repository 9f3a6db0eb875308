"""Value checks of the gateway config on the one dialect, :class:`~tubemq_aio.checks.Checks`.

Each records its problems (naming the key) in the caller's ``Checks``, so one table or one
config with several bad keys reports all of them in one :class:`ConfigError`. The numeric
checks are ``Checks.integer`` and ``Checks.seconds`` themselves; these are the gateway's own
rules: names, topics, tables, lists of strings and unknown keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tubemq_aio.checks import Checks
from tubemq_aio.protocol.consumer_names import check_topic_name

__all__ = [
    "check_name",
    "check_topic",
    "no_unknown",
    "str_tuple",
    "tables",
]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def tables(checks: Checks, value: object, key: str) -> list[Mapping[str, Any]]:
    """``value`` as an array of TOML tables (``[[key]]``); ``[]`` after recording a problem."""
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        checks.problem(f"{key} must be an array of tables ([[{key}]])")
        return []
    return value


def str_tuple(checks: Checks, value: object, key: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings (from a list or tuple of them); ``()`` after recording a
    problem."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        checks.problem(f"{key} must be a list of strings")
        return ()
    return tuple(value)


def no_unknown(checks: Checks, raw: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    """Record every key of ``raw`` not in ``known`` (a typo must not pass silently)."""
    for unknown in sorted(set(raw) - known):
        checks.problem(f"unknown config key {prefix}{unknown}")


def check_name(checks: Checks, value: object, key: str) -> bool:
    """A name of 1-64 of ``A-Z a-z 0-9 _ . -``; returns whether it is one."""
    if not isinstance(value, str) or not _NAME.match(value):
        checks.problem(f"{key}: {value!r} is not a valid name (1-64 of A-Z a-z 0-9 _ . -)")
        return False
    return True


def check_topic(checks: Checks, value: object, key: str) -> None:
    """A name that is also a valid TubeMQ topic name."""
    if check_name(checks, value, key):
        check_topic_name(checks, value, name=key)
