"""Plain data of the consume engine: settings, leases, fetch outcomes, reports, counters.

Re-exported by :mod:`tubemq_aio.gateway.engine.service`, the engine's public module.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tubemq_aio.auth import Credentials
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.limits import LEASE_MS_CEILING, LEASE_MS_FLOOR
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_meta import validate_group_name, validate_topic_name

__all__ = [
    "MAX_OFFSET",
    "MIN_RATE",
    "ConsumeSettings",
    "FetchOutcome",
    "GatewayStats",
    "GroupSpec",
    "LagEntry",
    "LagReport",
    "Lease",
    "LeaseRef",
    "Mode",
    "Position",
    "ResetEntry",
]

Mode = Literal["clustering", "broadcast"]
#: The largest offset the store holds exactly: its Lua scripts keep numbers as doubles, so a
#: larger one would be rounded (or wrap negative and read as "no committed offset").
MAX_OFFSET = 2**53 - 1
#: The smallest consume rate (messages/s) other than 0 (off). The limiter's schedule lives in
#: Redis as µs doubles: at a much smaller rate one message's interval (1e6 / rate µs) dwarfs
#: the clock, the sums lose it, and the limit would silently let everything through.
MIN_RATE = 0.001


def _positive_int(name: str, value: object, low: int = 1, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}")
    if high is not None and value > high:
        raise ConfigError(f"{name} must be <= {high}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSpec:
    """One consumer group served by the gateway.

    Attributes:
        name: the TubeMQ consumer group.
        topics: its topics.
        mode: ``clustering`` (members share partitions) or ``broadcast`` (each client_id gets
            everything).
        start: where a partition with no committed offset starts.
        lease_ms: default lease; a request may ask for one in ``[lease_ms_min, lease_ms_max]``.
        lease_ms_min: shortest lease.
        lease_ms_max: longest lease.
        max_clients: broadcast only: ``client_id`` s the group keeps state for at most (a new
            one beyond it is refused until the housekeeper collects an idle one); 0 = no cap.
        max_clients_per_key: the same per API key (the one that first used a client_id);
            0 = only the group's cap.
    """

    name: str
    topics: tuple[str, ...]
    mode: Mode = "clustering"
    start: Literal["earliest", "latest"] = "earliest"
    lease_ms: int = 60_000
    lease_ms_min: int = 10_000
    lease_ms_max: int = 43_200_000
    max_clients: int = 1000
    max_clients_per_key: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or validate_group_name(self.name) != self.name:
            raise ConfigError("group name must be a string matching ^[a-zA-Z][\\w-]+$")
        if isinstance(self.topics, list):
            object.__setattr__(self, "topics", tuple(self.topics))
        if not isinstance(self.topics, tuple) or not self.topics:
            raise ConfigError(f"group {self.name!r} needs at least one topic")
        for topic in self.topics:
            if not isinstance(topic, str) or validate_topic_name(topic) != topic:
                raise ConfigError(f"topic {topic!r} of group {self.name!r} is not a valid name")
        if self.mode not in ("clustering", "broadcast"):
            raise ConfigError("mode must be 'clustering' or 'broadcast'")
        if self.start not in ("earliest", "latest"):
            raise ConfigError("start must be 'earliest' or 'latest'")
        _positive_int("lease_ms_min", self.lease_ms_min, LEASE_MS_FLOOR, LEASE_MS_CEILING)
        _positive_int("lease_ms_max", self.lease_ms_max, self.lease_ms_min, LEASE_MS_CEILING)
        _positive_int("lease_ms", self.lease_ms, self.lease_ms_min, self.lease_ms_max)
        _positive_int("max_clients", self.max_clients, 0, 1_000_000)
        _positive_int("max_clients_per_key", self.max_clients_per_key, 0, 1_000_000)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeSettings:
    """Engine knobs (the HTTP layer builds them from the TOML file).

    Attributes:
        masters: TubeMQ master address list.
        redis_url: Redis URL.
        deployment: part of the shared TubeMQ consumer id; replicas of one deployment share it.
        groups: the groups served.
        rpc_timeout: seconds per TubeMQ RPC and per Redis round trip (3–600, the SDK's range).
        max_long_poll_waiters: long-poll fetches waiting at once on this replica.
        redis_max_connections: the replica's Redis connections at most (one is the wake
            listener's); a round trip waits for a free one rather than failing.
        redis_ack_replicas: replicas an ack waits for (``WAIT``; 0 = none).
        redis_ack_wait_ms: how long that wait may take.
        not_found_wait_ms: how long a partition rests after "no new data".
        credentials: TubeMQ credentials, or None.
        ssl_context: TLS towards the master and brokers, or None.
        tls_server_hostname: one host name to check in every peer's certificate, or None.
        allow_init: a start on a Redis without the boot marker writes it (tests and
            ``tubemq-gateway init`` only: after a loss it would hide the loss).
        sync_interval: seconds between partition metadata refreshes per scope.
    """

    masters: str
    redis_url: str
    deployment: str = "default"
    groups: tuple[GroupSpec, ...] = ()
    rpc_timeout: float = 5.0
    max_long_poll_waiters: int = 1000
    redis_max_connections: int = 64
    redis_ack_replicas: int = 0
    redis_ack_wait_ms: int = 100
    not_found_wait_ms: int = 400
    credentials: Credentials | None = None
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    tls_server_hostname: str | None = None
    allow_init: bool = False
    sync_interval: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.masters, str) or not self.masters:
            raise ConfigError("masters must be a non-empty address list")
        if not isinstance(self.redis_url, str) or not self.redis_url:
            raise ConfigError("redis_url must be a non-empty URL")
        for name, low in (("rpc_timeout", 3.0), ("sync_interval", 0.1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{name} must be a number")
            if not (math.isfinite(value) and low <= value <= 600):
                raise ConfigError(f"{name} must be in [{low}, 600] seconds")
        _positive_int("max_long_poll_waiters", self.max_long_poll_waiters, 0)
        _positive_int("redis_max_connections", self.redis_max_connections, 2, 10_000)
        _positive_int("redis_ack_replicas", self.redis_ack_replicas, 0, 16)
        _positive_int("redis_ack_wait_ms", self.redis_ack_wait_ms, 1, 60_000)
        _positive_int("not_found_wait_ms", self.not_found_wait_ms, 0, 60_000)
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ConfigError("group names must be unique")


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """What a verified lease token carries."""

    group: str
    scope: str
    partition_key: str
    lease_id: str


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease granted by a fetch.

    Attributes:
        group: the group.
        scope: ``c`` or ``b:<client_id>``.
        partition_key: ``brokerId:topic:partitionId``.
        lease_id: 128-bit random hex; the only authority.
        expires_at_ms: Redis clock, ms since the epoch.
        redelivery: how often this batch was delivered before.
    """

    group: str
    scope: str
    partition_key: str
    lease_id: str
    expires_at_ms: int
    redelivery: int

    def ref(self) -> LeaseRef:
        """The reference a token carries."""
        return LeaseRef(self.group, self.scope, self.partition_key, self.lease_id)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a leased batch sits in its partition (index offsets, bytes).

    Attributes:
        start: batch start (the committed offset).
        next: offset after the batch (committed by an ack).
        max: the store's max offset (-1 unknown).
        lag_bytes: ``max - start`` (0 if unknown).
        skipped_bytes: bytes the broker skipped (data expired below ``start``).
    """

    start: int
    next: int
    max: int
    lag_bytes: int
    skipped_bytes: int = 0


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """The answer of one fetch."""

    status: Literal["ok", "empty", "busy", "paused", "throttled"]
    lease: Lease | None
    messages: Sequence[Message]
    retry_after_ms: int | None = None
    position: Position | None = None


@dataclass(frozen=True, slots=True)
class ResetEntry:
    """One partition moved by a reset (``new`` is an offset or ``earliest``/``latest``)."""

    partition_key: str
    old: int | None
    new: int | str
    scope: str = "c"


@dataclass(frozen=True, slots=True)
class LagEntry:
    """Backlog of one partition in one scope (index bytes; shared stores over-count)."""

    partition_key: str
    committed: int | None
    max: int | None
    lag_bytes: int | None
    lease_holder: str | None = None
    lease_expires_at: int | None = None
    redelivery: int = 0
    gone: bool = False


@dataclass(frozen=True, slots=True)
class LagReport:
    """Backlog of a group (one scope)."""

    group: str
    scope: str
    partitions: tuple[LagEntry, ...]
    total_lag_bytes: int


@dataclass(slots=True)
class GatewayStats:
    """Plain counters of one replica's engine (``ConsumeService.stats()`` returns a copy).

    ``broker_rpcs`` and ``fetch_redis_roundtrips`` count everything fetches spent (idle polls
    included); ``ok_broker_rpcs`` and ``ok_redis_roundtrips`` only what the lease attempts that
    returned a batch spent (acquire to record), so ``ok_broker_rpcs / fetches_ok`` is the cost of
    reading one batch and ``broker_rpcs / fetches_ok`` the cost including idle probes.
    ``redis_roundtrips`` counts every Redis round trip of the replica (acks, admin, fetches);
    ``ack_wait_short`` the acks whose ``WAIT`` ended before the replicas confirmed them.
    """

    fetches: int = 0
    fetches_ok: int = 0
    fetches_empty: int = 0
    fetches_busy: int = 0
    fetches_paused: int = 0
    fetches_throttled: int = 0
    messages: int = 0
    broker_batches: int = 0
    redeliveries: int = 0
    empty_scans: int = 0
    broker_rpcs: int = 0
    broker_registers: int = 0
    broker_errors: int = 0
    cursor_resyncs: int = 0
    offset_rewinds: int = 0
    partition_refusals: int = 0
    clients_refused: int = 0
    cursor_lock_lapses: int = 0
    redis_roundtrips: int = 0
    fetch_redis_roundtrips: int = 0
    ok_broker_rpcs: int = 0
    ok_redis_roundtrips: int = 0
    acks: int = 0
    nacks: int = 0
    releases: int = 0
    already_settled: int = 0
    stale: int = 0
    conflicts: int = 0
    extends: int = 0
    resets: int = 0
    long_poll_waiters: int = 0
    skipped_bytes: int = 0
    state_lost: int = 0
    store_errors: int = 0
    ack_wait_short: int = 0
