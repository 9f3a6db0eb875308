"""Where ``cluster up`` (real or fake) records the running cluster, for ``down`` and ``status``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tubemq_aio.testing._maven import cache_root

__all__ = [
    "FAKE_KIND",
    "is_recorded_fake",
    "recorded_web_api",
    "state_file",
]

#: ``kind`` in the state file of a fake (the real cluster's state file has no ``kind``).
FAKE_KIND = "fake"


def state_file() -> Path:
    """Return the state file path: ``$TUBEMQ_AIO_STATE`` or ``<cache root>/cluster.json``.

    Returns:
        The path.
    """
    env = os.environ.get("TUBEMQ_AIO_STATE")
    return Path(env).expanduser() if env else cache_root() / "cluster.json"


def recorded_web_api(master: str | None = None) -> str | None:
    """The web API address (``host:port``) of the real cluster ``cluster up`` recorded.

    Args:
        master: The master address the caller uses; the record counts only when it names the
            recorded cluster's master (None: any recorded cluster).

    Returns:
        ``host:port``, or None without a record (no state file, a fake, or another master).
    """
    state = _recorded_for(master)
    if not state.get("master_web"):
        return None
    web = str(state["master_web"])
    return web.removeprefix("http://").removesuffix("/webapi.htm")


def is_recorded_fake(master: str | None = None) -> bool:
    """Whether the cluster ``cluster up`` recorded is the in-memory fake (``up --fake``), which
    serves no web API.

    Args:
        master: The master address the caller uses; the record counts only when it names the
            recorded cluster's master (None: any recorded cluster).
    """
    return _recorded_for(master).get("kind") == FAKE_KIND


def _recorded_for(master: str | None) -> dict[str, Any]:
    """The record, when it names ``master`` (None: any record), else an empty one."""
    state = _recorded()
    return state if master is None or master == state.get("master_addr") else {}


def _recorded() -> dict[str, Any]:
    try:
        state = json.loads(state_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}
