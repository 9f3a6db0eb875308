"""Gateway configuration: a TOML file read once into frozen dataclasses.

Every key is validated here, before any I/O, and bad values raise one :class:`ConfigError`
naming every bad key (of one table, or of the top level). The HMAC secret and API keys never
appear in a ``repr`` (keys are kept only as SHA-256 digests). The repeated and nested tables
(groups, keys, housekeeper) are in :mod:`.tables`, the value checks in
:mod:`.value_checks`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, cast

from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.cors import CorsConfig
from tubemq_aio.gateway.config.engine_settings import EngineSettings
from tubemq_aio.gateway.config.limits import (
    DEFAULT_TOKEN_CACHE_SIZE,
    MAX_BATCH_CEILING,
    MAX_BODY_TIMEOUT_SECONDS,
    MAX_SETTING_SECONDS,
    MAX_TOKEN_CACHE_SIZE,
)
from tubemq_aio.gateway.config.sources import gather_sources
from tubemq_aio.gateway.config.stream_config import StreamConfig
from tubemq_aio.gateway.config.tables import (
    ApiKey,
    GroupConfig,
    HousekeeperConfig,
    check_scopes,
    group_table,
    housekeeper_table,
    key_table,
)
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess
from tubemq_aio.gateway.config.value_checks import (
    check_topic,
    no_unknown,
    str_tuple,
    tables,
)
from tubemq_aio.gateway.leases.redis_client import redis_table_options

__all__ = ["MIN_SECRET_BYTES", "GatewayConfig"]

_T = TypeVar("_T")

MIN_SECRET_BYTES = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig(EngineSettings):
    """Everything one gateway replica needs; every replica of a deployment uses the same file.

    The engine's settings (``masters``, ``redis``, ``tubemq``, ``deployment``,
    ``rpc_timeout``, ``max_long_poll_waiters``, ``redis_*``, ``not_found_wait_ms``,
    ``sync_interval``) are :class:`EngineSettings`'; in a file, a ``[redis]`` table may hold
    ``redis`` and the other ``redis_*`` settings. The gateway's own:

    Attributes:
        secret: HMAC key of lease tokens (at least 16 bytes), identical on every replica.
        produce_topics: topics the gateway may publish to.
        groups: the consumer groups served.
        keys: API keys; without any, the gateway refuses to start unless ``allow_anonymous``.
        allow_anonymous: serve requests without ``Authorization`` as the principal
            ``anonymous`` (a loud warning at start).
        anonymous_scopes: the scopes of ``anonymous`` (only with ``allow_anonymous``); by
            default every scope when no key is configured (a development setup), none when
            keys are, so an anonymous caller never gets more than a named key by default.
        cors: cross-origin access for browser clients (see :class:`CorsConfig`; off by default).
        docs: serve ``/docs`` (Swagger UI) and ``/redoc``, assets included (no CDN).
        max_batch: most messages in one batch produce request.
        max_body_bytes: largest request body accepted (larger → 413).
        body_timeout: seconds from a request's start within which its whole body must have
            arrived, in (0, 3600]; later → 408 ``request_timeout`` and the connection closed
            (a client trickling its body must not hold a request forever).
        produce_timeout: seconds one produce waits for the broker before answering 504.
        produce_fail_fast_ms: a produce not done after this long probes the masters (a TCP
            connect each); when none answers it is answered 503 ``tube_unavailable`` at once,
            as are the produces of the next second (see
            :mod:`~tubemq_aio.gateway.tubemq.master_reach`); 0 = never probe.
        master_probe_timeout: seconds one such probe's TCP connect to a master may take, in
            (0, 60]. The default, 1.5, outlasts the kernel's first SYN retransmission (1 s):
            one lost packet does not make a reachable master look down.
        max_long_polls_per_key: long polls one API key (or ``anonymous``) holds at once on a
            replica (more → 503 ``too_many_waiters``); 0 = a fair share,
            ``max_long_poll_waiters`` divided by the number of principals.
        auth_cache_size: verified ``Authorization`` headers a replica remembers (a request
            with one skips the key check); 0 remembers none.
        token_cache_size: lease tokens a replica remembers issuing (their ack skips the HMAC
            check; any other token is checked); 0 remembers none, at most 1 000 000.
        noop_route: serve ``POST /v1/noop`` (same auth and body parsing as produce, no send):
            the framework floor the produce benchmark compares against. Off by default.
        housekeeper: the elected background jobs (see :class:`HousekeeperConfig`).
        stream: the streaming consume route (see :class:`StreamConfig`).
        ui: serve the ``/ui`` page (lists topics and groups, tails a group's stream); off by
            default. The page holds no data: every call it makes needs an API key.
    """

    secret: str = field(repr=False)
    produce_topics: tuple[str, ...] = ()
    groups: tuple[GroupConfig, ...] = ()
    keys: tuple[ApiKey, ...] = ()
    allow_anonymous: bool = False
    cors: CorsConfig = field(default_factory=CorsConfig)
    docs: bool = True
    anonymous_scopes: tuple[str, ...] | None = None
    max_batch: int = 500
    max_body_bytes: int = 8 * 1024 * 1024
    body_timeout: float = 30.0
    produce_timeout: float = 10.0
    produce_fail_fast_ms: int = 1000
    master_probe_timeout: float = 1.5
    max_long_polls_per_key: int = 0
    auth_cache_size: int = 1024
    token_cache_size: int = DEFAULT_TOKEN_CACHE_SIZE
    noop_route: bool = False
    housekeeper: HousekeeperConfig = field(default_factory=HousekeeperConfig)
    stream: StreamConfig = field(default_factory=StreamConfig)
    ui: bool = False

    def __post_init__(self) -> None:
        checks = Checks("gateway config")
        self.check_engine(checks)
        if not isinstance(self.secret, str) or not self.secret.strip():
            checks.problem("secret is required (a non-empty string)")
        elif len(self.secret.encode()) < MIN_SECRET_BYTES:
            checks.problem(f"secret must be at least {MIN_SECRET_BYTES} bytes long")
        checks.instance("cors", self.cors, CorsConfig)
        checks.instance("stream", self.stream, StreamConfig)
        if checks.instance("housekeeper", self.housekeeper, HousekeeperConfig):
            self._check_idle_time(checks)
        for topic in self.produce_topics:
            check_topic(checks, topic, "produce_topics")
        for g in self.groups:
            if g.dlq_topic is not None and g.dlq_topic not in self.produce_topics:
                checks.problem(f"groups[{g.spec.name!r}].dlq_topic must be one of produce_topics")
        names = [g.spec.name for g in self.groups]
        if len(set(names)) != len(names):
            checks.problem("groups: a group name appears twice")
        for flag in ("allow_anonymous", "noop_route", "docs", "ui"):
            if not isinstance(getattr(self, flag), bool):
                checks.problem(f"{flag} must be true or false")  # TOML's spelling
        if self.anonymous_scopes is not None:
            if not self.allow_anonymous:
                checks.problem("anonymous_scopes needs allow_anonymous = true")
            check_scopes(checks, self.anonymous_scopes, "anonymous_scopes")
        if not self.keys and not self.allow_anonymous:
            checks.problem("keys: no [[keys]] configured; add one or set allow_anonymous = true")
        self._check_numbers(checks)
        checks.done()

    def _check_numbers(self, checks: Checks) -> None:
        """Record every numeric setting of the gateway's own out of its range in ``checks``."""
        checks.integer("max_batch", self.max_batch, low=1, high=MAX_BATCH_CEILING)
        checks.integer("max_body_bytes", self.max_body_bytes, low=1024, high=1 << 30)
        checks.seconds("body_timeout", self.body_timeout, high=MAX_BODY_TIMEOUT_SECONDS)
        checks.seconds("produce_timeout", self.produce_timeout, high=MAX_SETTING_SECONDS)
        checks.integer("produce_fail_fast_ms", self.produce_fail_fast_ms, low=0, high=600_000)
        checks.seconds("master_probe_timeout", self.master_probe_timeout, high=60.0)
        checks.integer("max_long_polls_per_key", self.max_long_polls_per_key, low=0, high=1_000_000)
        checks.integer("auth_cache_size", self.auth_cache_size, low=0, high=1_000_000)
        checks.integer("token_cache_size", self.token_cache_size, low=0, high=MAX_TOKEN_CACHE_SIZE)

    def _check_idle_time(self, checks: Checks) -> None:
        """An active client is marked as seen once per ``sync_interval`` (per replica): a
        shorter idle time could delete the state of a client that is still reading."""
        sync, idle = self.sync_interval, self.housekeeper.client_idle_ms
        if isinstance(sync, int | float) and 0 < idle < 2000 * sync:
            checks.problem(
                "housekeeper.client_idle_ms must be 0 (never) or at least 2 x sync_interval "
                f"({int(2000 * sync)} ms)"
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
        return next((g for g in self.groups if g.spec.name == name), None)

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
    def load(cls, path: str | Path | None, env: Mapping[str, str]) -> GatewayConfig:
        """The configuration from the TOML file at ``path`` (None: none) with the settings of
        the environment ``env`` over it (``TUBEMQ_GATEWAY_*``; see
        :mod:`~tubemq_aio.gateway.config.sources` for the names and the precedence).

        Raises:
            ConfigError: a file cannot be read, or a setting is missing or invalid.
        """
        return cls.from_mapping(gather_sources(path, env, cls).data)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GatewayConfig:
        """Validate an already parsed TOML document (same keys as the file).

        Raises:
            ConfigError: a key is unknown, has the wrong type or an invalid value.
        """
        checks = Checks("gateway config")
        no_unknown(checks, data, frozenset(f.name for f in fields(cls)), "")
        options: dict[str, Any] = {
            k: v
            for k, v in data.items()
            if k not in ("groups", "keys", "housekeeper", "tubemq", "cors", "stream")
        }
        if isinstance(options.get("redis"), Mapping):
            try:
                options.update(redis_table_options(options.pop("redis"), options))
            except ConfigError as err:
                checks.adopt(err)
        for key in ("masters", "redis", "secret", "deployment"):
            if key in options and not isinstance(options[key], str):
                checks.problem(f"{key} must be a string")
        for key in ("produce_topics", "anonymous_scopes"):
            if key in options:
                options[key] = str_tuple(checks, options[key], key)
        groups = tables(checks, data.get("groups", []), "groups")
        options["groups"] = tuple(_adopted(checks, group_table, g, i) for i, g in enumerate(groups))
        keys = tables(checks, data.get("keys", []), "keys")
        options["keys"] = tuple(_adopted(checks, key_table, k, i) for i, k in enumerate(keys))
        if "housekeeper" in data:
            options["housekeeper"] = _adopted(checks, housekeeper_table, data["housekeeper"])
        if "tubemq" in data:
            options["tubemq"] = _adopted(
                checks, TubeMQAccess.from_mapping, data["tubemq"], data.get("masters")
            )
        if "cors" in data:
            options["cors"] = _adopted(checks, CorsConfig.from_mapping, data["cors"])
        if "stream" in data:
            options["stream"] = _adopted(checks, StreamConfig.from_mapping, data["stream"])
        for key in ("masters", "redis", "secret"):
            if key not in options:
                checks.problem(f"{key} is required")
        checks.done()
        return cls(**options)


def _adopted(checks: Checks, build: Callable[..., _T], *args: Any) -> _T:
    """``build(*args)``; its :class:`ConfigError` is recorded in ``checks`` (whose ``done``
    raises before the value, then a placeholder, is used)."""
    try:
        return build(*args)
    except ConfigError as err:
        checks.adopt(err)
        return cast(_T, None)
