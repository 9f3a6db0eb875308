"""The consume engine's settings, written once: the gateway config and the engine both are them.

:class:`EngineSettings` holds what the consume engine needs from the configuration: where the
cluster and Redis are, how TubeMQ is reached (TLS, credentials, framing: :class:`TubeMQAccess`)
and the engine's limits. ``GatewayConfig`` (the TOML file) and ``ConsumeSettings`` (the engine's
own knobs) both extend it, so each setting is declared, documented and checked in this one
place; the TOML keys and the ``TUBEMQ_GATEWAY_*`` variables are derived from the fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.limits import MAX_KEPT_BATCH_BYTES, MAX_SETTING_SECONDS
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess, split_masters_url
from tubemq_aio.gateway.config.value_checks import check_name
from tubemq_aio.gateway.leases.redis_client import parse_redis_url

__all__ = ["DEFAULT_KEPT_BATCH_BYTES", "EngineSettings"]

#: ``kept_batch_bytes`` by default: read-ahead off, nothing kept (32 MiB is a sensible value on).
DEFAULT_KEPT_BATCH_BYTES = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """Where the cluster and Redis are, how TubeMQ is reached, and the engine's limits.

    Attributes:
        masters: TubeMQ master address list ``"h1:8715,h2:8715"``; a ``tubemq://user:pass@…``
            or ``tubemqs://…`` URL is split here: its credentials and TLS go to ``tubemq`` and
            ``masters`` keeps the addresses.
        redis: Redis URL holding the consume state: ``redis://host:port/db`` (also
            ``rediss://``, ``unix://``), ``redis+sentinel://h1:26379,h2:26379/<service>/<db>``
            or ``redis+cluster://h1:7000,h2:7001`` (see
            :mod:`~tubemq_aio.gateway.leases.redis_client`); never in a repr (it may carry a
            password).
        tubemq: TLS, credentials and framing towards the cluster (see :class:`TubeMQAccess`).
        deployment: names this deployment inside the shared TubeMQ consumer id; replicas of
            one deployment share it.
        rpc_timeout: seconds per TubeMQ RPC and Redis round trip of the consume engine, in
            [3, 600] (the SDK's range).
        max_long_poll_waiters: long-polling fetches one replica holds at once (more → 503).
        redis_max_connections: Redis connections one replica opens at most (one is the wake
            listener's); a round trip waits for a free one (within ``rpc_timeout``) instead
            of failing with 503.
        redis_ack_replicas: after an ack, ``WAIT`` until this many Redis replicas hold it
            (0 = answer at once; not with ``redis+cluster://``). A failover then cannot lose
            an answered ack unless the replica fails too.
        redis_ack_wait_ms: how long that ``WAIT`` may take; past it the ack still succeeds
            (``tubemq_gateway_engine_ack_wait_short`` + 1).
        not_found_wait_ms: how long an idle partition rests before it is probed again.
        kept_batch_bytes: payload bytes of read-ahead batches one replica keeps at most, over
            every partition (default 0, off: every fetch ends with a CommitOffset and nothing
            is kept; 33554432, 32 MiB, is a sensible value when on). When on, after a fetch whose
            batch may not have reached the partition's end has answered, the replica reads the
            partition's next batch and keeps it for that partition's next fetch on this replica
            (``docs/gateway.md``, "The consume path", "Read-ahead off the critical path").
        sync_interval: seconds between partition metadata refreshes of one scope on one
            replica (also how often an active broadcast client is marked as seen).

    Raises:
        ConfigError: every invalid setting named at once.
    """

    masters: str
    redis: str = field(repr=False)  # the URL may carry a password
    tubemq: TubeMQAccess = field(default_factory=TubeMQAccess)
    deployment: str = "default"
    rpc_timeout: float = 5.0
    max_long_poll_waiters: int = 1000
    redis_max_connections: int = 64
    redis_ack_replicas: int = 0
    redis_ack_wait_ms: int = 100
    not_found_wait_ms: int = 400
    kept_batch_bytes: int = DEFAULT_KEPT_BATCH_BYTES
    sync_interval: float = 10.0

    def __post_init__(self) -> None:
        checks = Checks(type(self).__name__)
        self.check_engine(checks)
        checks.done()

    def check_engine(self, checks: Checks) -> None:
        """Record every invalid engine setting in ``checks``; a ``tubemq://`` URL in
        ``masters`` is split into ``masters`` and ``tubemq`` on the way (see
        :func:`split_masters_url`)."""
        given = {}
        for key in ("masters", "redis"):
            value = getattr(self, key)
            given[key] = isinstance(value, str) and bool(value.strip())
            if not given[key]:
                checks.problem(f"{key} is required (a non-empty string)")
        if checks.instance("tubemq", self.tubemq, TubeMQAccess) and given["masters"]:
            try:
                masters, access = split_masters_url(self.masters, self.tubemq)
                object.__setattr__(self, "masters", masters)
                object.__setattr__(self, "tubemq", access)
            except ConfigError as err:
                checks.adopt(err)
        supports_wait = True  # unless the URL says otherwise; its own problem is named apart
        if given["redis"]:
            try:
                supports_wait = parse_redis_url(self.redis).supports_wait
            except ConfigError as err:
                checks.adopt(err)
        check_name(checks, self.deployment, "deployment")
        checks.seconds(
            "rpc_timeout", self.rpc_timeout, low=3.0, high=MAX_SETTING_SECONDS, low_open=False
        )
        checks.seconds(
            "sync_interval", self.sync_interval, low=0.1, high=MAX_SETTING_SECONDS, low_open=False
        )
        checks.integer("max_long_poll_waiters", self.max_long_poll_waiters, low=0, high=1_000_000)
        checks.integer("redis_max_connections", self.redis_max_connections, low=2, high=10_000)
        checks.integer("redis_ack_replicas", self.redis_ack_replicas, low=0, high=16)
        checks.integer("redis_ack_wait_ms", self.redis_ack_wait_ms, low=1, high=60_000)
        if self.redis_ack_replicas and not supports_wait:
            checks.problem("redis_ack_replicas needs a redis:// or redis+sentinel:// store")
        checks.integer("not_found_wait_ms", self.not_found_wait_ms, low=0, high=60_000)
        checks.integer("kept_batch_bytes", self.kept_batch_bytes, low=0, high=MAX_KEPT_BATCH_BYTES)

    def engine_settings(self) -> dict[str, object]:
        """This value's engine settings by name (to build another :class:`EngineSettings`
        kind from it, e.g. the engine's settings from the gateway config)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(EngineSettings)}
