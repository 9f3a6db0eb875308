"""Every Redis key and channel of the gateway's state, built in one place.

All keys of a group share the hash tag ``{g:<group>}``, so every script of a group touches one
cluster slot; the layout is described in :mod:`tubemq_aio.gateway.leases.lease_store`.
"""

from __future__ import annotations

import functools

__all__ = [
    "BOOT_KEY",
    "WAKE_CHANNEL",
    "clients_keys",
    "cursor_lock_key",
    "leader_key",
    "scope_keys",
    "script_keys",
]

#: Marks a store initialised by ``tubemq-gateway init``.
BOOT_KEY = "tgw:boot"
#: Pub/sub channel of long-poll wake-ups (``<group>|<scope>``).
WAKE_CHANNEL = "tgw:wake"


def clients_keys(group: str) -> tuple[str, str, str]:
    """The broadcast scopes of a group: the SET of scopes, the ZSET scope → last seen ms and the
    HASH scope → the API key that first used it."""
    g = f"tgw:{{g:{group}}}"
    return f"{g}:clients", f"{g}:seen", f"{g}:owners"


def cursor_lock_key(group: str, p: str) -> str:
    """Broadcast: the short mutex over the group's broker cursor of partition ``p``."""
    return f"tgw:{{g:{group}}}:curlock:{p}"


def scope_keys(group: str, scope: str) -> list[str]:
    """The 9 keys every script takes, in order: cfg, rl, cur, st, ready, leased, parts, acq,
    done (settled lease ids and how they ended, kept for a lease's length)."""
    g = f"tgw:{{g:{group}}}"
    s = f"{g}:{scope}"
    return [
        f"{g}:cfg",
        f"{g}:rl",
        f"{g}:cur",
        f"{s}:st",
        f"{s}:ready",
        f"{s}:leased",
        f"{s}:parts",
        f"{s}:acq",
        f"{s}:done",
    ]


@functools.lru_cache(maxsize=1024)
def script_keys(group: str, scope: str) -> tuple[bytes, ...]:
    """:func:`scope_keys` UTF-8 encoded, and the scope's wake name ``<group>|<scope>`` last:
    built once per scope (the most recent 1024 kept) for the scripts a fetch runs, so each call
    sends them as they are."""
    return (*(k.encode() for k in scope_keys(group, scope)), f"{group}|{scope}".encode())


def leader_key(group: str) -> str:
    """The Redis key naming the housekeeper leader of ``group``."""
    return f"tgw:{{g:{group}}}:hk"
