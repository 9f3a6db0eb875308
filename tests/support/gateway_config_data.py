"""A valid gateway config as a parsed TOML mapping, for the config tests to spoil one key of."""

from __future__ import annotations

from typing import Any


def base(**over: Any) -> dict[str, Any]:
    """The smallest good config (one group, one key) with ``over`` laid on top."""
    data: dict[str, Any] = {
        "masters": "127.0.0.1:8715",
        "redis": "redis://127.0.0.1:6379/0",
        "secret": "0123456789abcdef-secret",
        "groups": [{"name": "g1", "topics": ["demo"]}],
        "keys": [{"key": "k-123456", "scopes": ["consume:*"]}],
    }
    data.update(over)
    return data
