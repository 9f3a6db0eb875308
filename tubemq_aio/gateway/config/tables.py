"""The gateway config's repeated and nested tables: ``[[groups]]``, ``[[keys]]``,
``[housekeeper]``.

:class:`GroupSpec` is what the consume engine needs of a group; :class:`GroupConfig` is a
``GroupSpec`` plus the HTTP layer's poison-batch options, so the two share one set of fields and
one set of checks.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.limits import LEASE_MS_CEILING, LEASE_MS_FLOOR
from tubemq_aio.gateway.config.value_checks import (
    check_name,
    check_topic,
    no_unknown,
    str_tuple,
)
from tubemq_aio.protocol.consumer_names import validate_group_name

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
_KEY_KEYS = frozenset({"key", "key_sha256", "name", "scopes"})
_HK_KEYS = frozenset(
    {"enabled", "leader_lease_ms", "probe_interval_ms", "client_idle_ms", "session_idle_ms"}
)
_WEEK_MS = 7 * 86_400_000
_POISON_KEYS = frozenset({"max_redeliveries", "dlq_topic"})


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
        msg_time_zone: the IANA zone the group's producers stamp ``msg_time`` in (``UTC``;
            Java producers stamp local time): an offsets reset ``to_time`` reads the stamps in
            it (docs/protocol/time.md).
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
    msg_time_zone: str = "UTC"

    def __post_init__(self) -> None:
        checks = Checks(f"groups[{self.name!r}]")
        if check_name(checks, self.name, "name"):
            try:
                validate_group_name(self.name)  # it is also the TubeMQ consumer group
            except ConfigError as err:
                checks.problem(f"name: {err}")
        if isinstance(self.topics, list):
            object.__setattr__(self, "topics", tuple(self.topics))
        if not isinstance(self.topics, tuple) or not self.topics:
            checks.problem("topics must list at least one topic")
        else:
            for topic in self.topics:
                check_topic(checks, topic, "topics")
        checks.choice("mode", self.mode, ("clustering", "broadcast"))
        checks.choice("start", self.start, ("earliest", "latest"))
        leases = [
            checks.integer(key, getattr(self, key), low=LEASE_MS_FLOOR, high=LEASE_MS_CEILING)
            for key in ("lease_ms_min", "lease_ms", "lease_ms_max")
        ]
        whole = all(
            type(getattr(self, k)) is int for k in ("lease_ms_min", "lease_ms", "lease_ms_max")
        )
        if whole and not leases[0] <= leases[1] <= leases[2]:
            checks.problem("need lease_ms_min <= lease_ms <= lease_ms_max")
        checks.integer("max_clients", self.max_clients, low=0, high=1_000_000)
        checks.integer("max_clients_per_key", self.max_clients_per_key, low=0, high=1_000_000)
        checks.time_zone("msg_time_zone", self.msg_time_zone)
        checks.done()


#: The ``[[groups]]`` keys that are :class:`GroupSpec` fields.
_SPEC_KEYS = frozenset(f.name for f in fields(GroupSpec))


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """One consumer group the gateway serves (``[[groups]]``): the :class:`GroupSpec` the
    consume engine serves, and what the gateway does with poison batches. The table is flat
    (``name``, ``topics``, …, ``dlq_topic``); :func:`group_table` splits it.

    Attributes:
        spec: the group as the consume engine serves it (name, topics, mode, leases, …).
        max_redeliveries: poison batches (opt-in, 0 = off): a batch redelivered this many
            times is produced to ``dlq_topic`` the next time it comes round, then committed.
        dlq_topic: where poison batches go (must be one of ``produce_topics``).
    """

    spec: GroupSpec
    max_redeliveries: int = 0
    dlq_topic: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, GroupSpec):
            raise ConfigError(f"groups: spec must be a GroupSpec, got {type(self.spec).__name__}")
        checks = Checks(f"groups[{self.spec.name!r}]")
        _check_poison(checks, self.spec.topics, self.max_redeliveries, self.dlq_topic)
        checks.done()

    def table(self) -> dict[str, object]:
        """The flat ``[[groups]]`` table this value reads from (:func:`group_table`)."""
        spec = {f.name: getattr(self.spec, f.name) for f in fields(GroupSpec)}
        return {**spec, "max_redeliveries": self.max_redeliveries, "dlq_topic": self.dlq_topic}


def _check_poison(
    checks: Checks, topics: tuple[str, ...], max_redeliveries: object, dlq_topic: object
) -> None:
    """Record the problems of a group's poison-batch fields; ``topics`` are the ones the
    group consumes."""
    redeliveries = checks.integer("max_redeliveries", max_redeliveries, low=0, high=1_000_000)
    if (redeliveries > 0) != (dlq_topic is not None):
        checks.problem("max_redeliveries > 0 and dlq_topic go together")
    if dlq_topic is not None:
        check_topic(checks, dlq_topic, "dlq_topic")
        if dlq_topic in topics:
            checks.problem("dlq_topic must not be a topic the group consumes")


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
        checks = Checks("housekeeper")
        if not isinstance(self.enabled, bool):
            checks.problem("housekeeper.enabled must be true or false")  # TOML's spelling
        checks.integer("housekeeper.leader_lease_ms", self.leader_lease_ms, low=1000, high=600_000)
        for key in ("probe_interval_ms", "client_idle_ms", "session_idle_ms"):
            value = checks.integer(
                f"housekeeper.{key}", getattr(self, key), low=0, high=365 * 86_400_000
            )
            if key != "client_idle_ms" and 0 < value < 1000:
                checks.problem(f"housekeeper.{key} must be 0 (never) or at least 1000")
        checks.done()


@functools.lru_cache(maxsize=4096)
def _scopes_allow(scopes: tuple[str, ...], kind: str, resource: str) -> bool:
    """:meth:`ApiKey.allows`, remembered for the most recent 4 096 questions (a fetch asks
    two or three, each a glob match per scope)."""
    prefix = kind + ":"
    return any(
        s.startswith(prefix) and fnmatch.fnmatchcase(resource, s[len(prefix) :]) for s in scopes
    )


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
        return _scopes_allow(self.scopes, kind, resource)


def housekeeper_table(raw: object) -> HousekeeperConfig:
    """The ``[housekeeper]`` table, checked."""
    checks = Checks("housekeeper")
    if not isinstance(raw, Mapping):
        checks.fail("housekeeper must be a table ([housekeeper])")
    no_unknown(checks, raw, _HK_KEYS, "housekeeper.")
    checks.done()
    return HousekeeperConfig(**raw)


def group_table(raw: Mapping[str, Any], index: int) -> GroupConfig:
    """The ``index``-th ``[[groups]]`` table, checked."""
    where = f"groups[{index}]"
    checks = Checks(where)
    no_unknown(checks, raw, _SPEC_KEYS | _POISON_KEYS, where + ".")
    if not isinstance(raw.get("name"), str):
        checks.problem(f"{where}.name is required (a string)")
    options = dict(raw)
    options["topics"] = str_tuple(checks, raw.get("topics", []), f"{where}.topics")
    for key in ("mode", "start", "dlq_topic", "msg_time_zone"):
        if key in options and not isinstance(options[key], str):
            checks.problem(f"{where}.{key} must be a string")
    checks.done()
    # One error naming every bad field, of the spec and of the poison batches alike.
    what = f"groups[{options['name']!r}]"
    group = Checks(what)
    try:
        spec: GroupSpec | None = GroupSpec(**{k: options[k] for k in _SPEC_KEYS & options.keys()})
    except ConfigError as err:
        group.problem(str(err).removeprefix(f"{what}: "))
        spec = None
    poison = {k: options[k] for k in _POISON_KEYS & options.keys()}
    topics = options["topics"]
    _check_poison(group, topics, poison.get("max_redeliveries", 0), poison.get("dlq_topic"))
    group.done()
    assert spec is not None  # done() raised otherwise
    return GroupConfig(spec=spec, **poison)


def key_table(raw: Mapping[str, Any], index: int) -> ApiKey:
    """The ``index``-th ``[[keys]]`` table, checked (the key itself is kept only hashed)."""
    where = f"keys[{index}]"
    checks = Checks(where)
    no_unknown(checks, raw, _KEY_KEYS, where + ".")
    plain, hashed = raw.get("key"), raw.get("key_sha256")
    digest = b""
    if (plain is None) == (hashed is None):
        checks.problem(f"{where}: give exactly one of key and key_sha256")
    elif plain is not None:
        if not isinstance(plain, str) or len(plain) < 8:
            checks.problem(f"{where}.key must be a string of at least 8 characters")
        else:
            digest = hashlib.sha256(plain.encode()).digest()
    elif not isinstance(hashed, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", hashed):
        checks.problem(f"{where}.key_sha256 must be 64 hex digits")
    else:
        digest = bytes.fromhex(hashed)
    name = raw.get("name", f"key{index}")
    if not isinstance(name, str) or not name:
        checks.problem(f"{where}.name must be a non-empty string")
    scopes = str_tuple(checks, raw.get("scopes", []), f"{where}.scopes")
    check_scopes(checks, scopes, f"{where}.scopes")
    checks.done()
    return ApiKey(name=str(name), digest=digest, scopes=scopes)


def check_scopes(checks: Checks, scopes: tuple[str, ...], key: str) -> None:
    """Record each scope that is not ``produce:<glob>``, ``consume:<glob>`` or
    ``admin:<glob>``."""
    for scope in scopes:
        kind, sep, pattern = scope.partition(":") if isinstance(scope, str) else ("", "", "")
        if not sep or kind not in _SCOPE_KINDS or not pattern:
            checks.problem(
                f"{key}: {scope!r} is not produce:<glob>, consume:<glob> or admin:<glob>"
            )
