"""Rebalance events of the server-balanced consumer (docs/protocol/consumer.md §2.3–2.6) as pure
state machines.

The master hands out at most one event per heartbeat response. :class:`RebalanceQueue` keeps the
newest unprocessed event; an :class:`EventProcess` turns one event into the steps the I/O layer
performs (register/unregister at brokers, waits), and its final :class:`Report` step produces
the :class:`EventResult` that :class:`MasterHeartbeatState` sends on the next heartbeat.
:class:`MasterHeartbeatState` also decides when to report subscriptions and when to re-register
or back off after heartbeat failures.

Times are monotonic float seconds (``now``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Protocol

from tubemq_aio.protocol.consumer_meta import Partition, PartitionKey, SubscribeInfo
from tubemq_aio.protocol.retry import REBALANCE_REGISTER_RETRY, RetryPolicy, RetryWindow

__all__ = [
    "AwaitReturn",
    "Drop",
    "EventProcess",
    "EventProtoLike",
    "EventResult",
    "EventStatus",
    "EventType",
    "HeartbeatReport",
    "HeartbeatVerdict",
    "MasterHeartbeatState",
    "RebalanceConfig",
    "RebalanceEvent",
    "RebalanceQueue",
    "Register",
    "Report",
    "Sleep",
    "Step",
    "StopRebalance",
    "Unregister",
    "parse_event",
]


class EventType(IntEnum):
    """``EventProto.opType`` values (§2.3)."""

    UNKNOWN = -1
    CONNECT = 1
    DISCONNECT = 2
    REPORT = 3
    REFRESH = 4
    STOP_REBALANCE = 5
    ONLY_CONNECT = 10
    ONLY_DISCONNECT = 20


class EventStatus(IntEnum):
    """``EventProto.status`` values (§2.3)."""

    FAILED = -2
    UNKNOWN = -1
    TODO = 0
    PROCESSING = 1
    DONE = 2


_CONNECTS = frozenset({EventType.CONNECT, EventType.ONLY_CONNECT})
_DISCONNECTS = frozenset({EventType.DISCONNECT, EventType.ONLY_DISCONNECT})


class EventProtoLike(Protocol):
    """The fields of a generated ``EventProto`` that :func:`parse_event` reads."""

    @property
    def rebalanceId(self) -> int: ...
    @property
    def opType(self) -> int: ...
    @property
    def subscribeInfo(self) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    """One event from ``HeartResponseM2C.event``: raw ``opType`` (usually an
    :class:`EventType`), the raw subscribe info strings (echoed in the result) and their
    partitions."""

    rebalance_id: int
    op_type: int
    subscribe_info: tuple[str, ...]
    partitions: tuple[Partition, ...]


def parse_event(proto: EventProtoLike) -> RebalanceEvent | None:
    """Turn an ``EventProto`` into a :class:`RebalanceEvent`; None unless ``rebalanceId > 0``
    (a client acts only on those, §2.3). Raises ``MalformedMetaError`` for bad strings."""
    if proto.rebalanceId <= 0:
        return None
    infos = tuple(proto.subscribeInfo)
    parts = tuple(SubscribeInfo.parse(s).partition for s in infos)
    return RebalanceEvent(proto.rebalanceId, proto.opType, infos, parts)


@dataclass(frozen=True, slots=True)
class EventResult:
    """A processed event to send in ``HeartRequestC2M.event`` (§2.4 item 4)."""

    rebalance_id: int
    op_type: int
    status: int
    subscribe_info: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    """Knobs of event processing (Java defaults, §2.4, §9.2).

    Attributes:
        confirm_wait: seconds a revoked partition waits for its batch to come back (3 s).
        rollback_in_use: a batch still out when the wait ends counts as not consumed (True).
        register_timeout: seconds from the start of the first register round during which
            partitions a broker refused are registered again (4 s: the Java client's 5 rounds
            1 s apart, ``maxRegisterRetryTimes``, counted as time so that fast failures, e.g. a
            broker restarting, do not use them up; the consumer sets
            ``register_attempts - 1`` seconds). A last round is made at the deadline; 0 makes
            one round.
        register_retry: the pauses between rounds, inside that time
            (:data:`~tubemq_aio.protocol.retry.REBALANCE_REGISTER_RETRY`: 0.1 s doubling to 1 s).
    """

    confirm_wait: float = 3.0
    rollback_in_use: bool = True
    register_timeout: float = 4.0
    register_retry: RetryPolicy = REBALANCE_REGISTER_RETRY


@dataclass(frozen=True, slots=True)
class Register:
    """Send ``RegisterRequestC2B`` opType 31 for each partition, then report every answer
    with :meth:`EventProcess.on_register_result`."""

    partitions: tuple[Partition, ...]
    round: int


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait until ``until`` (monotonic seconds) before asking for the next step."""

    until: float


@dataclass(frozen=True, slots=True)
class AwaitReturn:
    """Block new leases of ``keys`` (``PartitionLeases.revoke``) and wait until none is in use
    or ``deadline`` passes."""

    keys: tuple[PartitionKey, ...]
    deadline: float


@dataclass(frozen=True, slots=True)
class Unregister:
    """``PartitionLeases.remove(key, rollback_if_in_use=...)`` each; for those that were held
    send opType 32 with the removed partition's ``read_status`` (errors only logged, §2.4)."""

    partitions: tuple[Partition, ...]
    rollback_in_use: bool


@dataclass(frozen=True, slots=True)
class Drop:
    """Forget partitions locally without any request (registration gave up on them)."""

    keys: tuple[PartitionKey, ...]


@dataclass(frozen=True, slots=True)
class Report:
    """Queue ``result`` with :meth:`MasterHeartbeatState.add_result` for the next heartbeat."""

    result: EventResult


@dataclass(frozen=True, slots=True)
class StopRebalance:
    """The client-internal shutdown marker: stop the rebalance worker."""


Step = Register | Sleep | AwaitReturn | Unregister | Drop | Report | StopRebalance

# Registration answers that end the attempts for a partition at once (§2.4 item 3).
_GIVE_UP_CODES = frozenset({410, 415})


class _Phase(Enum):
    START = 0
    WAITED = 1
    UNREGISTERED = 2
    REGISTERING = 3
    REPORTED = 4


class EventProcess:
    """The processing plan of one event (Java behaviour, §2.4).

    Call :meth:`next_step` until it returns None, performing each step before asking again.

    * CONNECT / ONLY_CONNECT: :class:`Register` the partitions not already held; failed ones
      (other than 410/415) are registered again after a :class:`Sleep` (growing from 0.1 s to
      1 s) until ``register_timeout`` seconds after the first round; leftovers are dropped;
      then :class:`Report` DONE (even when some failed, like Java).
    * DISCONNECT / ONLY_DISCONNECT: :class:`AwaitReturn`, :class:`Unregister`, :class:`Report`.
    * STOP_REBALANCE: :class:`StopRebalance`. REPORT, REFRESH and unknown types: nothing, no
      result (Java, §12 item 12).
    """

    def __init__(
        self,
        event: RebalanceEvent,
        *,
        held: Collection[PartitionKey],
        config: RebalanceConfig | None = None,
    ) -> None:
        """``held``: the partition keys held now (connect events skip them)."""
        self.event = event
        self._config = config or RebalanceConfig()
        self._phase = _Phase.START
        self._round = 0
        self._window = RetryWindow(self._config.register_retry, self._config.register_timeout)
        unique = {p.key: p for p in event.partitions}
        self._pending: dict[PartitionKey, Partition] = {
            k: p for k, p in unique.items() if k not in held
        }
        self._outstanding: set[PartitionKey] = set()
        self.registered: list[PartitionKey] = []
        self.given_up: list[PartitionKey] = []

    def __repr__(self) -> str:
        return (
            f"<EventProcess id={self.event.rebalance_id} op={self.event.op_type} "
            f"phase={self._phase.name} round={self._round} pending={len(self._pending)}>"
        )

    def next_step(self, now: float, rand: float = 0.0) -> Step | None:
        """The next action, or None when the event is fully processed.

        Args:
            now: the current time (monotonic seconds).
            rand: a uniform random number in [0, 1) for the jitter of a register pause.
        """
        op = self.event.op_type
        if op == EventType.STOP_REBALANCE:
            if self._phase is _Phase.START:
                self._phase = _Phase.REPORTED
                return StopRebalance()
            return None
        if op in _DISCONNECTS:
            return self._disconnect_step(now)
        if op in _CONNECTS:
            return self._connect_step(now, rand)
        return None

    def on_register_result(self, key: PartitionKey, err_code: int) -> None:
        """Record the broker's answer to a :class:`Register` step (599 for an RPC failure)."""
        if key not in self._outstanding:
            return
        self._outstanding.discard(key)
        if err_code == 200:
            self._pending.pop(key, None)
            self.registered.append(key)
        elif err_code in _GIVE_UP_CODES:
            self._pending.pop(key, None)
            self.given_up.append(key)

    def _report(self) -> Report:
        self._phase = _Phase.REPORTED
        event = self.event
        return Report(
            EventResult(event.rebalance_id, event.op_type, EventStatus.DONE, event.subscribe_info)
        )

    def _disconnect_step(self, now: float) -> Step | None:
        parts = tuple({p.key: p for p in self.event.partitions}.values())
        if self._phase is _Phase.START:
            self._phase = _Phase.WAITED
            return AwaitReturn(tuple(p.key for p in parts), now + self._config.confirm_wait)
        if self._phase is _Phase.WAITED:
            self._phase = _Phase.UNREGISTERED
            return Unregister(parts, self._config.rollback_in_use)
        if self._phase is _Phase.UNREGISTERED:
            return self._report()
        return None

    def _connect_step(self, now: float, rand: float) -> Step | None:
        if self._phase is _Phase.REPORTED:
            return None
        # Answers never reported for the last round count as failures of that round.
        self._outstanding.clear()
        if not self._pending:
            return self._report()
        if self._phase is _Phase.REGISTERING:
            pause = self._window.failed(now, rand)
            if pause is None:  # the deadline has passed: what is left is dropped
                leftovers = tuple(self._pending)
                self.given_up.extend(leftovers)
                self._pending.clear()
                return Drop(leftovers)
            self._phase = _Phase.START
            return Sleep(now + pause)
        self._window.begin(now)
        self._phase = _Phase.REGISTERING
        self._round += 1
        self._outstanding = set(self._pending)
        return Register(tuple(self._pending.values()), self._round)


class RebalanceQueue:
    """Events waiting for the rebalance worker: taking one discards any older ones (§2.4 item 1)."""

    def __init__(self) -> None:
        self._events: deque[RebalanceEvent] = deque()

    def __len__(self) -> int:
        return len(self._events)

    def offer(self, event: RebalanceEvent) -> None:
        """Queue an event received in a heartbeat response."""
        self._events.append(event)

    def take(self) -> RebalanceEvent | None:
        """The newest event, clearing the rest; None when empty."""
        if not self._events:
            return None
        event = self._events.pop()
        self._events.clear()
        return event


class HeartbeatVerdict(Enum):
    """What to do after a master heartbeat answer (§2.6)."""

    OK = "ok"
    REREGISTER = "reregister"
    FAILED = "failed"
    BACKOFF = "backoff"


@dataclass(frozen=True, slots=True)
class HeartbeatReport:
    """The next ``HeartRequestC2M``'s event result (if any) and whether to set
    ``reportSubscribeInfo=true`` with every held partition (§2.2)."""

    event: EventResult | None
    report_subscribe_info: bool


class MasterHeartbeatState:
    """Event-result reporting and failure counting of the master heartbeat (Java, §2.1, §2.6)."""

    def __init__(self, *, max_report_interval: int = 6, max_retries: int = 5) -> None:
        """``max_report_interval``: ``maxSubInfoReportIntvlTimes`` (min 3); ``max_retries``:
        ``maxHeartBeatRetryTimes`` (more failures mean a back-off)."""
        self._interval = max(3, max_report_interval)
        self._max_retries = max_retries
        self._results: deque[EventResult] = deque()
        self._since_report = 0
        self._report_due = False
        self.failures = 0
        #: Bound consumption: True until the first connect event was processed (Java isFirst).
        self.first_connect_pending = True

    def __repr__(self) -> str:
        return f"<MasterHeartbeatState results={len(self._results)} failures={self.failures}>"

    def add_result(self, result: EventResult) -> None:
        """Queue a processed event (from a :class:`Report` step)."""
        if result.op_type in _CONNECTS:
            self.first_connect_pending = False
        self._results.append(result)

    def next_report(self) -> HeartbeatReport:
        """What the next heartbeat carries: at most one result, and the subscribe list when a
        result is sent or on every ``max_report_interval``-th heartbeat without one.

        The result is handed out once and not re-queued if the heartbeat fails: the master
        acknowledges its head event on any heartbeat with ``rebalanceId > 0`` without checking
        the id (§12 item 8), so a resend could acknowledge an event not yet processed.
        """
        event = self._results.popleft() if self._results else None
        if event is not None:
            self._since_report = 0
            self._report_due = False
            return HeartbeatReport(event, True)
        self._since_report += 1
        if self._report_due or self._since_report >= self._interval:
            self._since_report = 0
            self._report_due = False
            return HeartbeatReport(None, True)
        return HeartbeatReport(None, False)

    def held_changed(self) -> None:
        """Partitions were dropped locally, outside any event (a broker forgot this client, or
        its broker kept failing): the next heartbeat reports what is held, so the master hands
        them out again after one heartbeat rather than after up to ``max_report_interval``
        (Java waits for the periodic report; a partition the master believes held is
        consumed by nobody meanwhile)."""
        self._report_due = True

    def on_registered(self) -> None:
        """A register at the master succeeded: it proves the master serves this consumer as
        well as a heartbeat does, so the failure count restarts (the Go client does this; the
        Java one does not, and then backs off for a minute after one more failure)."""
        self.failures = 0

    def on_response(self, success: bool | None, err_code: int = 200) -> HeartbeatVerdict:
        """Classify a heartbeat outcome (``success=None`` for an RPC exception or no answer).

        Returns:
            OK (counter reset); REREGISTER for 411 (send ``RegisterRequestC2M`` with the
            current subscribe info once now); BACKOFF when failures exceed ``max_retries``
            (sleep ``heartbeatPeriodAfterFail`` = 60 s; like Java, every further failure backs
            off again until a success, or a successful register (:meth:`on_registered`),
            resets the counter); else FAILED.
        """
        if success:
            self.failures = 0
            return HeartbeatVerdict.OK
        if success is not None and err_code == 411:
            return HeartbeatVerdict.REREGISTER
        self.failures += 1
        if self.failures > self._max_retries:
            return HeartbeatVerdict.BACKOFF
        return HeartbeatVerdict.FAILED
