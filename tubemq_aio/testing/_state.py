"""Where ``cluster up`` (real or fake) records the running cluster, for ``down`` and ``status``."""

from __future__ import annotations

import os
from pathlib import Path

from tubemq_aio.testing._maven import cache_root

__all__ = ["state_file"]


def state_file() -> Path:
    """Return the state file path: ``$TUBEMQ_AIO_STATE`` or ``<cache root>/cluster.json``.

    Returns:
        The path.
    """
    env = os.environ.get("TUBEMQ_AIO_STATE")
    return Path(env).expanduser() if env else cache_root() / "cluster.json"
