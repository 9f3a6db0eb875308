"""Gateway configuration: a TOML file read once into frozen dataclasses.

Every key is validated here, before any I/O, and a bad value raises :class:`ConfigError` naming
the key. The HMAC secret and API keys never appear in a ``repr`` (keys are kept only as SHA-256
digests).
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.cors import CorsConfig
from tubemq_aio.gateway.limits import LEASE_MS_CEILING, LEASE_MS_FLOOR, MAX_BATCH_CEILING
from tubemq_aio.gateway.redis_client import parse_redis_url, redis_table_options
from tubemq_aio.gateway.tubemq_access import TubeMQAccess, split_masters_url
from tubemq_aio.protocol.consumer_meta import validate_group_name, validate_topic_name

__all__ = ["ApiKey", "GatewayConfig", "GroupConfig", "HousekeeperConfig"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SCOPE_KINDS = ("produce", "consume", "admin")
_TOP_KEYS = frozenset(
    {
        "masters",
        "redis",
        "secret",
        "produce_topics",
        "groups",
        "keys",
        "allow_anonymous",
        "tubemq",
        "cors",
        "docs",
        "anonymous_scopes",
        "deployment",
        "max_batch",
        "max_body_bytes",
        "produce_timeout",
        "rpc_timeout",
        "max_long_poll_waiters",
        "redis_max_connections",
        "redis_ack_replicas",
        "redis_ack_wait_ms",
        "max_long_polls_per_key",
        "not_found_wait_ms",
        "noop_route",
        "sync_interval",
        "housekeeper",
    }
)
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
MIN_SECRET_BYTES = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """One consumer group the gateway serves (``[[groups]]``).

    Attributes:
        name: the group name (also the HTTP path segment).
        topics: the topics the group consumes.
        mode: ``clustering`` (members share partitions) or ``broadcast`` (each ``client_id``
            gets everything).
        start: where a partition with no committed offset starts.
        lease_ms: default lease of a fetched batch, milliseconds.
        lease_ms_min: smallest lease a request may ask for.
        lease_ms_max: largest lease a request may ask for.
        max_redeliveries: poison batches (opt-in, 0 = off): a batch redelivered this many
            times is produced to ``dlq_topic`` the next time it comes round, then committed.
        dlq_topic: where poison batches go (must be one of ``produce_topics``).
        max_clients: broadcast only: ``client_id`` s kept at most (more → 409
            ``too_many_clients``); 0 = no cap.
        max_clients_per_key: the same per API key; 0 = only ``max_clients``.
    """

    name: str
    topics: tuple[str, ...]
    mode: Literal["clustering", "broadcast"] = "clustering"
    start: Literal["earliest", "latest"] = "earliest"
    lease_ms: int = 60_000
    lease_ms_min: int = 10_000
    lease_ms_max: int = 43_200_000
    max_redeliveries: int = 0
    dlq_topic: str | None = None
    max_clients: int = 1000
    max_clients_per_key: int = 0

    def __post_init__(self) -> None:
        where = f"groups[{self.name!r}]"
        _check_name(self.name, f"{where}.name")
        try:
            validate_group_name(self.name)  # it is also the TubeMQ consumer group
        except ConfigError as err:
            raise ConfigError(f"{where}.name: {err}") from None
        if not self.topics:
            raise ConfigError(f"{where}.topics must list at least one topic")
        for topic in self.topics:
            _check_topic(topic, f"{where}.topics")
        if self.mode not in ("clustering", "broadcast"):
            raise ConfigError(f"{where}.mode must be 'clustering' or 'broadcast'")
        if self.start not in ("earliest", "latest"):
            raise ConfigError(f"{where}.start must be 'earliest' or 'latest'")
        for key in ("lease_ms", "lease_ms_min", "lease_ms_max"):
            _check_int(getattr(self, key), f"{where}.{key}", LEASE_MS_FLOOR, LEASE_MS_CEILING)
        if not self.lease_ms_min <= self.lease_ms <= self.lease_ms_max:
            raise ConfigError(f"{where}: need lease_ms_min <= lease_ms <= lease_ms_max")
        _check_int(self.max_redeliveries, f"{where}.max_redeliveries", 0, 1_000_000)
        _check_int(self.max_clients, f"{where}.max_clients", 0, 1_000_000)
        _check_int(self.max_clients_per_key, f"{where}.max_clients_per_key", 0, 1_000_000)
        if (self.max_redeliveries > 0) != (self.dlq_topic is not None):
            raise ConfigError(f"{where}: max_redeliveries > 0 and dlq_topic go together")
        if self.dlq_topic is not None:
            _check_topic(self.dlq_topic, f"{where}.dlq_topic")
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
        _check_int(self.leader_lease_ms, "housekeeper.leader_lease_ms", 1000, 600_000)
        for key in ("probe_interval_ms", "client_idle_ms", "session_idle_ms"):
            _check_int(getattr(self, key), f"housekeeper.{key}", 0, 365 * 86_400_000)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """Everything one gateway replica needs; every replica of a deployment uses the same file.

    Attributes:
        masters: TubeMQ master address list ``"h1:8715,h2:8715"``; a ``tubemq://user:pass@…``
            or ``tubemqs://…`` URL is split here: its credentials and TLS go to ``tubemq`` and
            ``masters`` keeps the addresses.
        redis: Redis URL holding the consume state: ``redis://host:port/db`` (also
            ``rediss://``, ``unix://``), ``redis+sentinel://h1:26379,h2:26379/<service>/<db>``
            or ``redis+cluster://h1:7000,h2:7001`` (see :mod:`.redis_client`); in a file, a
            ``[redis]`` table may hold it and the other ``redis_*`` settings.
        secret: HMAC key of lease tokens (at least 16 bytes), identical on every replica.
        produce_topics: topics the gateway may publish to.
        groups: the consumer groups served.
        keys: API keys; without any, the gateway refuses to start unless ``allow_anonymous``.
        allow_anonymous: serve requests without ``Authorization`` as the principal
            ``anonymous`` (a loud warning at start).
        anonymous_scopes: the scopes of ``anonymous`` (only with ``allow_anonymous``); by
            default every scope when no key is configured (a development setup), none when
            keys are, so an anonymous caller never gets more than a named key by default.
        tubemq: TLS and credentials towards the cluster (see :class:`TubeMQAccess`).
        cors: cross-origin access for browser clients (see :class:`CorsConfig`; off by default).
        docs: serve ``/docs`` (Swagger UI) and ``/redoc``, assets included (no CDN).
        deployment: names this deployment inside the shared TubeMQ consumer id.
        max_batch: most messages in one batch produce request.
        max_body_bytes: largest request body accepted (larger → 413).
        produce_timeout: seconds one produce waits for the broker before answering 504.
        rpc_timeout: seconds per TubeMQ RPC and Redis round trip of the consume engine, in
            [3, 600].
        max_long_poll_waiters: long-polling fetches one replica holds at once (more → 503).
        max_long_polls_per_key: long polls one API key (or ``anonymous``) holds at once on a
            replica (more → 503 ``too_many_waiters``); 0 = a fair share,
            ``max_long_poll_waiters`` divided by the number of principals.
        redis_max_connections: Redis connections one replica opens at most; a round trip
            waits for a free one (within ``rpc_timeout``) instead of failing with 503.
        redis_ack_replicas: after an ack, ``WAIT`` until this many Redis replicas hold it
            (0 = answer at once; not with ``redis+cluster://``). A failover then cannot lose
            an answered ack unless the replica fails too.
        redis_ack_wait_ms: how long that ``WAIT`` may take; past it the ack still succeeds
            (``tubemq_gateway_engine_ack_wait_short`` + 1).
        not_found_wait_ms: how long an idle partition rests before it is probed again.
        noop_route: serve ``POST /v1/noop`` (same auth and body parsing as produce, no send):
            the framework floor the produce benchmark compares against. Off by default.
        sync_interval: seconds between partition metadata refreshes of one scope on one
            replica (also how often an active broadcast client is marked as seen).
        housekeeper: the elected background jobs (see :class:`HousekeeperConfig`).
    """

    masters: str
    redis: str = field(repr=False)  # the URL may carry a password
    secret: str = field(repr=False)
    produce_topics: tuple[str, ...] = ()
    groups: tuple[GroupConfig, ...] = ()
    keys: tuple[ApiKey, ...] = ()
    allow_anonymous: bool = False
    tubemq: TubeMQAccess = field(default_factory=TubeMQAccess)
    cors: CorsConfig = field(default_factory=CorsConfig)
    docs: bool = True
    anonymous_scopes: tuple[str, ...] | None = None
    deployment: str = "default"
    max_batch: int = 500
    max_body_bytes: int = 8 * 1024 * 1024
    produce_timeout: float = 10.0
    rpc_timeout: float = 5.0
    max_long_poll_waiters: int = 1000
    redis_max_connections: int = 64
    redis_ack_replicas: int = 0
    redis_ack_wait_ms: int = 100
    max_long_polls_per_key: int = 0
    not_found_wait_ms: int = 400
    noop_route: bool = False
    sync_interval: float = 10.0
    housekeeper: HousekeeperConfig = field(default_factory=HousekeeperConfig)

    def __post_init__(self) -> None:
        for key in ("masters", "redis", "secret"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key).strip():
                raise ConfigError(f"{key} is required (a non-empty string)")
        if not isinstance(self.tubemq, TubeMQAccess):
            raise ConfigError("tubemq must be a [tubemq] table")
        if not isinstance(self.cors, CorsConfig):
            raise ConfigError("cors must be a [cors] table")
        masters, access = split_masters_url(self.masters, self.tubemq)
        object.__setattr__(self, "masters", masters)
        object.__setattr__(self, "tubemq", access)
        if len(self.secret.encode()) < MIN_SECRET_BYTES:
            raise ConfigError(f"secret must be at least {MIN_SECRET_BYTES} bytes long")
        redis_topology = parse_redis_url(self.redis)
        for topic in self.produce_topics:
            _check_topic(topic, "produce_topics")
        for g in self.groups:
            if g.dlq_topic is not None and g.dlq_topic not in self.produce_topics:
                raise ConfigError(f"groups[{g.name!r}].dlq_topic must be one of produce_topics")
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ConfigError("groups: a group name appears twice")
        for flag in ("allow_anonymous", "noop_route", "docs"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be true or false")
        if self.anonymous_scopes is not None:
            if not self.allow_anonymous:
                raise ConfigError("anonymous_scopes needs allow_anonymous = true")
            _check_scopes(self.anonymous_scopes, "anonymous_scopes")
        if not self.keys and not self.allow_anonymous:
            raise ConfigError("keys: no [[keys]] configured; add one or set allow_anonymous = true")
        _check_name(self.deployment, "deployment")
        _check_int(self.max_batch, "max_batch", 1, MAX_BATCH_CEILING)
        _check_int(self.max_body_bytes, "max_body_bytes", 1024, 1 << 30)
        _check_seconds(self.produce_timeout, "produce_timeout")
        _check_seconds(self.rpc_timeout, "rpc_timeout", low=3.0)
        _check_int(self.max_long_poll_waiters, "max_long_poll_waiters", 0, 1_000_000)
        _check_int(self.redis_max_connections, "redis_max_connections", 2, 10_000)
        _check_int(self.redis_ack_replicas, "redis_ack_replicas", 0, 16)
        _check_int(self.redis_ack_wait_ms, "redis_ack_wait_ms", 1, 60_000)
        if self.redis_ack_replicas and not redis_topology.supports_wait:
            raise ConfigError("redis_ack_replicas needs a redis:// or redis+sentinel:// store")
        _check_int(self.max_long_polls_per_key, "max_long_polls_per_key", 0, 1_000_000)
        _check_int(self.not_found_wait_ms, "not_found_wait_ms", 0, 60_000)
        _check_seconds(self.sync_interval, "sync_interval", low=0.1)
        if not isinstance(self.housekeeper, HousekeeperConfig):
            raise ConfigError("housekeeper must be a [housekeeper] table")
        idle = self.housekeeper.client_idle_ms
        if 0 < idle < 2000 * self.sync_interval:
            # An active client is marked as seen once per sync_interval (per replica): a
            # shorter idle time could delete the state of a client that is still reading.
            raise ConfigError(
                "housekeeper.client_idle_ms must be 0 (never) or at least 2 x sync_interval "
                f"({int(2000 * self.sync_interval)} ms)"
            )

    def long_poll_share(self) -> int:
        """Long polls one principal may hold at once on a replica."""
        if self.max_long_polls_per_key:
            return self.max_long_polls_per_key
        principals = len(self.keys) + int(self.allow_anonymous)
        return max(1, self.max_long_poll_waiters // max(1, principals))

    def anonymous_grant(self) -> tuple[str, ...]:
        """The scopes of a request without a key (empty unless ``allow_anonymous``)."""
        if not self.allow_anonymous:
            return ()
        if self.anonymous_scopes is not None:
            return self.anonymous_scopes
        return () if self.keys else ("produce:*", "consume:*", "admin:*")

    def group(self, name: str) -> GroupConfig | None:
        """The configured group called ``name``, or None."""
        return next((g for g in self.groups if g.name == name), None)

    @classmethod
    def from_toml(cls, path: str | Path) -> GatewayConfig:
        """Read and validate a TOML file.

        Raises:
            ConfigError: the file is missing, not TOML, or a key is unknown or invalid.
        """
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise ConfigError(f"cannot read the gateway config {str(path)!r}: {err}") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"the gateway config is not valid TOML: {err}") from None
        return cls.from_mapping(data)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GatewayConfig:
        """Validate an already parsed TOML document (same keys as the file).

        Raises:
            ConfigError: a key is unknown, has the wrong type or an invalid value.
        """
        _no_unknown(data, _TOP_KEYS, "")
        options: dict[str, Any] = {
            k: v
            for k, v in data.items()
            if k not in ("groups", "keys", "housekeeper", "tubemq", "cors")
        }
        if isinstance(options.get("redis"), Mapping):
            options.update(redis_table_options(options.pop("redis"), options))
        for key in ("masters", "redis", "secret", "deployment"):
            if key in options and not isinstance(options[key], str):
                raise ConfigError(f"{key} must be a string")
        for key in ("produce_topics", "anonymous_scopes"):
            if key in options:
                options[key] = _str_tuple(options[key], key)
        options["groups"] = tuple(
            _group(g, i) for i, g in enumerate(_tables(data.get("groups", []), "groups"))
        )
        options["keys"] = tuple(
            _key(k, i) for i, k in enumerate(_tables(data.get("keys", []), "keys"))
        )
        if "housekeeper" in data:
            options["housekeeper"] = _housekeeper(data["housekeeper"])
        if "tubemq" in data:
            options["tubemq"] = TubeMQAccess.from_mapping(data["tubemq"], data.get("masters"))
        if "cors" in data:
            options["cors"] = CorsConfig.from_mapping(data["cors"])
        for key in ("masters", "redis", "secret"):
            if key not in options:
                raise ConfigError(f"{key} is required")
        return cls(**options)


def _housekeeper(raw: object) -> HousekeeperConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError("housekeeper must be a table ([housekeeper])")
    _no_unknown(raw, _HK_KEYS, "housekeeper.")
    return HousekeeperConfig(**raw)


def _group(raw: Mapping[str, Any], index: int) -> GroupConfig:
    where = f"groups[{index}]"
    _no_unknown(raw, _GROUP_KEYS, where + ".")
    if not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where}.name is required (a string)")
    options = dict(raw)
    options["topics"] = _str_tuple(raw.get("topics", []), f"{where}.topics")
    for key in ("mode", "start", "dlq_topic"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError(f"{where}.{key} must be a string")
    return GroupConfig(**options)


def _key(raw: Mapping[str, Any], index: int) -> ApiKey:
    where = f"keys[{index}]"
    _no_unknown(raw, _KEY_KEYS, where + ".")
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
    scopes = _str_tuple(raw.get("scopes", []), f"{where}.scopes")
    _check_scopes(scopes, f"{where}.scopes")
    return ApiKey(name=name, digest=digest, scopes=scopes)


def _check_scopes(scopes: tuple[str, ...], key: str) -> None:
    for scope in scopes:
        kind, sep, pattern = scope.partition(":") if isinstance(scope, str) else ("", "", "")
        if not sep or kind not in _SCOPE_KINDS or not pattern:
            raise ConfigError(
                f"{key}: {scope!r} is not produce:<glob>, consume:<glob> or admin:<glob>"
            )


def _tables(value: object, key: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError(f"{key} must be an array of tables ([[{key}]])")
    return value


def _str_tuple(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings")
    return tuple(value)


def _no_unknown(raw: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown config key {prefix}{unknown[0]}")


def _check_name(value: object, key: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigError(f"{key}: {value!r} is not a valid name (1-64 of A-Z a-z 0-9 _ . -)")


def _check_topic(value: object, key: str) -> None:
    _check_name(value, key)
    try:
        validate_topic_name(str(value))
    except ConfigError as err:
        raise ConfigError(f"{key}: {err}") from None


def _check_int(value: object, key: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{key} must be an integer in [{low}, {high}]")


def _check_seconds(value: object, key: str, low: float = 0.0) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not (low <= value <= 600 if low else 0 < value <= 600)
    ):
        span = f"[{low:g}, 600]" if low else "(0, 600]"
        raise ConfigError(f"{key} must be a number of seconds in {span}")
