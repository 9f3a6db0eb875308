"""Plain data of the consume engine: settings, leases, fetch outcomes, reports, counters.

Re-exported by :mod:`tubemq_aio.gateway.engine.service`, the engine's public module. A group's
:class:`GroupSpec` is the config's (``config.tables``): the engine takes the groups of the
configuration as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tubemq_aio.checks import Checks
from tubemq_aio.gateway.config.engine_settings import EngineSettings
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.models import Message

__all__ = [
    "MAX_OFFSET",
    "MIN_RATE",
    "ConsumeSettings",
    "FetchArgs",
    "FetchOutcome",
    "FetchQuery",
    "GatewayStats",
    "LagEntry",
    "LagReport",
    "Lease",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeSettings(EngineSettings):
    """The engine's settings (see :class:`EngineSettings`) with the groups it serves.

    Attributes:
        groups: the groups served (names unique).
        allow_init: a start on a Redis without the boot marker writes it (tests and
            ``tubemq-gateway init`` only: after a loss it would hide the loss).

    Raises:
        ConfigError: every invalid setting named at once (``"ConsumeSettings: …"``).
    """

    groups: tuple[GroupSpec, ...] = ()
    allow_init: bool = False

    def __post_init__(self) -> None:
        checks = Checks("ConsumeSettings")
        self.check_engine(checks)
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            checks.problem("group names must be unique")
        checks.done()

    @classmethod
    def of(cls, settings: EngineSettings, groups: tuple[GroupSpec, ...]) -> ConsumeSettings:
        """The engine settings of ``settings`` (e.g. a ``GatewayConfig``) serving ``groups``."""
        return cls(**settings.engine_settings(), groups=groups)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class FetchQuery:
    """What a caller asks of one fetch, as given (the engine checks it: see
    :class:`FetchArgs` for the checked form).

    Attributes:
        group: a configured group.
        client_id: required in broadcast groups, refused (must be None) in clustering ones.
        wait_ms: long poll: wait up to this long (0-30000 ms) for a batch.
        lease_ms: lease length in ms (None: the group's default).
        max_messages: gather further broker batches of the leased partition while the answer
            stays within this many messages (1-10000; None: one broker batch).
        holder: free text stored with the lease (e.g. principal@ip; cut to 200 characters).
        owner: the API key asking (broadcast: counted against ``max_clients_per_key``; cut to
            200 characters).
    """

    group: str
    client_id: str | None
    wait_ms: int = 0
    lease_ms: int | None = None
    max_messages: int | None = None
    holder: str = ""
    owner: str = ""


@dataclass(frozen=True, slots=True)
class FetchArgs:
    """One fetch's checked arguments (what every lease attempt of the fetch reads).

    Attributes:
        spec: the group.
        scope: ``c`` or ``b:<client_id>``.
        lease_ms: the lease length asked for.
        holder: free text stored with the lease (at most 200 characters).
        owner: the API key asking (at most 200 characters; broadcast client accounting).
        max_messages: gather further broker batches while the answer stays within this many
            messages (1: one broker batch).
        wait_ms: long poll: how long the fetch may wait for a batch.
    """

    spec: GroupSpec
    scope: str
    lease_ms: int
    holder: str
    owner: str = ""
    max_messages: int = 1
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease granted by a fetch: its name and what the acquire told about it.

    Attributes:
        key: the lease's name (group, scope, partition, lease id), what a token carries.
        expires_at_ms: Redis clock, ms since the epoch.
        redelivery: how often this batch was delivered before.
    """

    key: LeaseKey
    expires_at_ms: int
    redelivery: int

    @property
    def group(self) -> str:
        """The group."""
        return self.key.group

    @property
    def scope(self) -> str:
        """``c`` or ``b:<client_id>``."""
        return self.key.scope

    @property
    def partition_key(self) -> str:
        """``brokerId:topic:partitionId``."""
        return self.key.partition_key

    @property
    def lease_id(self) -> str:
        """128-bit random hex; the only authority."""
        return self.key.lease_id


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
    ``redis_roundtrips`` counts every Redis round trip of the replica (acks, admin, fetches,
    the housekeeper's); ``settle_redis_roundtrips`` those of settles sent alone (an ack carried
    by a fetch rides in the fetch's acquire round trip and is counted in ``piggyback_acks``);
    ``offset_inits`` the round trips that wrote a partition's first committed offset;
    ``ack_wait_short`` the acks whose ``WAIT`` ended before the replicas confirmed them;
    ``kept_served`` the batches served from what was read after the partition's previous
    answer (no broker call of their own) and ``kept_dropped`` the kept batches dropped instead
    (their fence did not match, or the connection they were read on closed). The read-aheads
    sent after a fetch's answer (``docs/gateway.md``, "Read-ahead off the critical path"):
    ``read_aheads_sent`` those sent, ``read_aheads_kept`` those whose batch is kept,
    ``read_aheads_stale`` those whose mark was not theirs any more when they ended (a reset, or
    their deadline passed: the batch is dropped), ``read_aheads_aborted`` those whose answers
    had not come by the deadline (the connection was aborted) or that were too late to send.
    ``leases_left_to_lapse`` counts the leases a fetch gave up on with a broker request that
    may still arrive (a timeout, a lost connection, a cancelled fetch whose call was not
    answered within the read's budget): left to lapse at their expiry, not released.
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
    kept_served: int = 0
    kept_dropped: int = 0
    read_aheads_sent: int = 0
    read_aheads_kept: int = 0
    read_aheads_stale: int = 0
    read_aheads_aborted: int = 0
    leases_left_to_lapse: int = 0
    settle_redis_roundtrips: int = 0
    piggyback_acks: int = 0
    offset_inits: int = 0
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
