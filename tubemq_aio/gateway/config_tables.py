"""The gateway config's repeated and nested tables: ``[[groups]]``, ``[[keys]]``,
``[housekeeper]``.

:class:`GroupSpec` is what the consume engine needs of a group; :class:`GroupConfig` is a
``GroupSpec`` plus the HTTP layer's poison-batch options, so the two share one set of fields and
one set of checks.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config_checks import (
    check_int,
    check_name,
    check_topic,
    no_unknown,
    str_tuple,
)
from tubemq_aio.gateway.limits import LEASE_MS_CEILING, LEASE_MS_FLOOR
from tubemq_aio.protocol.consumer_meta import validate_group_name

__all__ = [
    "ApiKey",
    "GroupConfig",
    "GroupSpec",
    "HousekeeperConfig",
    "check_scopes",
    "group_table",
    "housekeeper_table",
    "key_table",
]

_SCOPE_KINDS = ("produce", "consume", "admin")
_GROUP_KEYS = frozenset(
    {
        "name",
        "topics",
        "mode",
        "start",
        "lease_ms",
        "lease_ms_min",
        "lease_ms_max",
        "max_redeliveries",
        "dlq_topic",
        "max_clients",
        "max_clients_per_key",
    }
)
_KEY_KEYS = frozenset({"key", "key_sha256", "name", "scopes"})
_HK_KEYS = frozenset(
    {"enabled", "leader_lease_ms", "probe_interval_ms", "client_idle_ms", "session_idle_ms"}
)
_WEEK_MS = 7 * 86_400_000


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSpec:
    """One consumer group as the consume engine serves it.

    Attributes:
        name: the TubeMQ consumer group (also the HTTP path segment).
        topics: the topics the group consumes.
        mode: ``clustering`` (members share partitions) or ``broadcast`` (each ``client_id``
            gets everything).
        start: where a partition with no committed offset starts.
        lease_ms: default lease of a fetched batch, milliseconds; a request may ask for one in
            ``[lease_ms_min, lease_ms_max]``.
        lease_ms_min: smallest lease a request may ask for.
        lease_ms_max: largest lease a request may ask for.
        max_clients: broadcast only: ``client_id`` s kept at most (a new one beyond it gets 409
            ``too_many_clients`` until the housekeeper collects an idle one); 0 = no cap.
        max_clients_per_key: the same per API key (the one that first used a client_id);
            0 = only ``max_clients``.
    """

    name: str
    topics: tuple[str, ...]
    mode: Literal["clustering", "broadcast"] = "clustering"
    start: Literal["earliest", "latest"] = "earliest"
    lease_ms: int = 60_000
    lease_ms_min: int = 10_000
    lease_ms_max: int = 43_200_000
    max_clients: int = 1000
    max_clients_per_key: int = 0

    def __post_init__(self) -> None:
        where = f"groups[{self.name!r}]"
        check_name(self.name, f"{where}.name")
        try:
            validate_group_name(self.name)  # it is also the TubeMQ consumer group
        except ConfigError as err:
            raise ConfigError(f"{where}.name: {err}") from None
        if isinstance(self.topics, list):
            object.__setattr__(self, "topics", tuple(self.topics))
        if not isinstance(self.topics, tuple) or not self.topics:
            raise ConfigError(f"{where}.topics must list at least one topic")
        for topic in self.topics:
            check_topic(topic, f"{where}.topics")
        if self.mode not in ("clustering", "broadcast"):
            raise ConfigError(f"{where}.mode must be 'clustering' or 'broadcast'")
        if self.start not in ("earliest", "latest"):
            raise ConfigError(f"{where}.start must be 'earliest' or 'latest'")
        for key in ("lease_ms", "lease_ms_min", "lease_ms_max"):
            check_int(getattr(self, key), f"{where}.{key}", LEASE_MS_FLOOR, LEASE_MS_CEILING)
        if not self.lease_ms_min <= self.lease_ms <= self.lease_ms_max:
            raise ConfigError(f"{where}: need lease_ms_min <= lease_ms <= lease_ms_max")
        check_int(self.max_clients, f"{where}.max_clients", 0, 1_000_000)
        check_int(self.max_clients_per_key, f"{where}.max_clients_per_key", 0, 1_000_000)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig(GroupSpec):
    """One consumer group the gateway serves (``[[groups]]``): a :class:`GroupSpec` plus poison
    batches.

    Attributes:
        max_redeliveries: poison batches (opt-in, 0 = off): a batch redelivered this many
            times is produced to ``dlq_topic`` the next time it comes round, then committed.
        dlq_topic: where poison batches go (must be one of ``produce_topics``).
    """

    max_redeliveries: int = 0
    dlq_topic: str | None = None

    def __post_init__(self) -> None:
        GroupSpec.__post_init__(self)  # zero-argument super() does not work in slotted classes
        where = f"groups[{self.name!r}]"
        check_int(self.max_redeliveries, f"{where}.max_redeliveries", 0, 1_000_000)
        if (self.max_redeliveries > 0) != (self.dlq_topic is not None):
            raise ConfigError(f"{where}: max_redeliveries > 0 and dlq_topic go together")
        if self.dlq_topic is not None:
            check_topic(self.dlq_topic, f"{where}.dlq_topic")
            if self.dlq_topic in self.topics:
                raise ConfigError(f"{where}.dlq_topic must not be a topic the group consumes")


@dataclass(frozen=True, slots=True, kw_only=True)
class HousekeeperConfig:
    """The per-group background jobs (``[housekeeper]``), run by one elected replica per group.

    Attributes:
        enabled: run the housekeeper at all (lag probes, lag gauges, broadcast client GC,
            idle-session close).
        leader_lease_ms: life of the leader key in Redis (renewed every third of it); a dead
            leader is replaced within about this long.
        probe_interval_ms: a partition nobody leased for this long gets its max offset read
            again (one broker register), so the lag of idle groups stays current; 0 = never.
        client_idle_ms: broadcast only: the state of a ``client_id`` not seen for this long is
            deleted (it starts over from the group's ``start`` if it comes back); 0 = never.
        session_idle_ms: a replica closes its TubeMQ session of a group no client fetched for
            this long (reopened by the next fetch); 0 = never.
    """

    enabled: bool = True
    leader_lease_ms: int = 15_000
    probe_interval_ms: int = 60_000
    client_idle_ms: int = _WEEK_MS
    session_idle_ms: int = 600_000

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigError("housekeeper.enabled must be true or false")
        check_int(self.leader_lease_ms, "housekeeper.leader_lease_ms", 1000, 600_000)
        for key in ("probe_interval_ms", "client_idle_ms", "session_idle_ms"):
            check_int(getattr(self, key), f"housekeeper.{key}", 0, 365 * 86_400_000)
        for key in ("probe_interval_ms", "session_idle_ms"):
            if 0 < getattr(self, key) < 1000:
                raise ConfigError(f"housekeeper.{key} must be 0 (never) or at least 1000")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API key (``[[keys]]``), kept only as its SHA-256 digest.

    Attributes:
        name: a label for logs and metrics (never the key itself).
        digest: SHA-256 of the key as sent in ``Authorization: Bearer <key>``.
        scopes: ``produce:<topic glob>``, ``consume:<group glob>``, ``admin:<group glob>``.
    """

    name: str
    digest: bytes = field(repr=False)
    scopes: tuple[str, ...]

    def allows(self, kind: str, resource: str) -> bool:
        """Whether a scope of ``kind`` covers ``resource`` (glob match, case-sensitive)."""
        prefix = kind + ":"
        return any(
            s.startswith(prefix) and fnmatch.fnmatchcase(resource, s[len(prefix) :])
            for s in self.scopes
        )


def housekeeper_table(raw: object) -> HousekeeperConfig:
    """The ``[housekeeper]`` table, checked."""
    if not isinstance(raw, Mapping):
        raise ConfigError("housekeeper must be a table ([housekeeper])")
    no_unknown(raw, _HK_KEYS, "housekeeper.")
    return HousekeeperConfig(**raw)


def group_table(raw: Mapping[str, Any], index: int) -> GroupConfig:
    """The ``index``-th ``[[groups]]`` table, checked."""
    where = f"groups[{index}]"
    no_unknown(raw, _GROUP_KEYS, where + ".")
    if not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where}.name is required (a string)")
    options = dict(raw)
    options["topics"] = str_tuple(raw.get("topics", []), f"{where}.topics")
    for key in ("mode", "start", "dlq_topic"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError(f"{where}.{key} must be a string")
    return GroupConfig(**options)


def key_table(raw: Mapping[str, Any], index: int) -> ApiKey:
    """The ``index``-th ``[[keys]]`` table, checked (the key itself is kept only hashed)."""
    where = f"keys[{index}]"
    no_unknown(raw, _KEY_KEYS, where + ".")
    plain, hashed = raw.get("key"), raw.get("key_sha256")
    if (plain is None) == (hashed is None):
        raise ConfigError(f"{where}: give exactly one of key and key_sha256")
    if plain is not None:
        if not isinstance(plain, str) or len(plain) < 8:
            raise ConfigError(f"{where}.key must be a string of at least 8 characters")
        digest = hashlib.sha256(plain.encode()).digest()
    else:
        if not isinstance(hashed, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", hashed):
            raise ConfigError(f"{where}.key_sha256 must be 64 hex digits")
        digest = bytes.fromhex(hashed)
    name = raw.get("name", f"key{index}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string")
    scopes = str_tuple(raw.get("scopes", []), f"{where}.scopes")
    check_scopes(scopes, f"{where}.scopes")
    return ApiKey(name=name, digest=digest, scopes=scopes)


def check_scopes(scopes: tuple[str, ...], key: str) -> None:
    """Each scope is ``produce:<glob>``, ``consume:<glob>`` or ``admin:<glob>``."""
    for scope in scopes:
        kind, sep, pattern = scope.partition(":") if isinstance(scope, str) else ("", "", "")
        if not sep or kind not in _SCOPE_KINDS or not pattern:
            raise ConfigError(
                f"{key}: {scope!r} is not produce:<glob>, consume:<glob> or admin:<glob>"
            )
