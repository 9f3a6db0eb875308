"""The consumer id every gateway replica of a deployment registers for a group."""

from __future__ import annotations

import re

from tubemq_aio import __version__
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.client_id import CLIENT_VERSION_PREFIX

__all__ = ["shared_consumer_id"]

_DEPLOYMENT = re.compile(r"^[A-Za-z0-9.-]{1,64}$")


def shared_consumer_id(deployment: str, group: str) -> str:
    """The consumer id every replica of ``deployment`` uses for ``group``.

    Java shape (``<group>_<ident>-Balance-<client>``); the broker reads ``ip#pid`` after the last
    ``_``, so the ident has none.

    Raises:
        ConfigError: ``deployment`` has characters other than letters, digits, ``.`` and ``-``.
    """
    if not isinstance(deployment, str) or not _DEPLOYMENT.match(deployment):
        raise ConfigError("deployment must be 1-64 of [A-Za-z0-9.-]")
    return f"{group}_gw-{deployment}-Balance-{CLIENT_VERSION_PREFIX}{__version__}"
