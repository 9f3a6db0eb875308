"""The fake master: producer (1-3), server-balanced consumer (4-6) and client-balanced V2
consumer (20-22) calls, with a small balancer that moves partitions through rebalance events
the way the real master does (docs/protocol/wire.md §4, docs/protocol/consumer.md §1, §2, §8)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.consumer_meta import SubscribeInfo
from tubemq_aio.protocol.pb import MasterService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing._fake_broker import FakeBroker
from tubemq_aio.testing._fake_rpc import FaultPlan, RpcNode
from tubemq_aio.testing._fake_store import TopicLayout

__all__ = ["FakeMaster"]

#: A partition as the master balances it: broker id, topic, partition id.
PartKey = tuple[int, str, int]
_CONNECT = 10  # ONLY_CONNECT
_DISCONNECT = 20  # ONLY_DISCONNECT
_OK = "OK!"
_VISIT_TOKEN = 1234567


@dataclass(slots=True)
class _Event:
    rebalance_id: int
    op_type: int
    parts: frozenset[PartKey]
    sent_at: float


@dataclass(slots=True)
class Member:
    """A registered consumer as the master sees it.

    Attributes:
        client_id: the consumer id.
        topics: the subscribed topics.
        held: partitions the master believes it holds.
        last_seen: monotonic time of its last register or heartbeat.
        client_balanced: registered with the V2 protocol (no rebalance events).
        next_event_at: monotonic time before which it gets no new rebalance event (one
            balance period after its previous one).
    """

    client_id: str
    topics: frozenset[str]
    last_seen: float
    held: set[PartKey] = field(default_factory=set)
    client_balanced: bool = False
    pending: _Event | None = None
    next_event_at: float = float("-inf")


class FakeMaster:
    """The master of a :class:`~tubemq_aio.testing.FakeCluster`.

    Args:
        topics: the cluster's topic layouts (shared, live).
        brokers: the cluster's brokers (shared, live).
        plan: the cluster's fault rules.
        client_timeout: seconds a producer or consumer survives without a heartbeat.
        event_timeout: seconds an unacknowledged rebalance event blocks its consumer.
        balance_period: seconds between two rebalance events of one member (its first comes
            at once). The real master balances a group once per ``consumerBalancePeriodMs``
            and skips a group whose events are unfinished (docs/protocol/consumer.md §2.1), so
            a consumer whose event failed (a partition the broker still gives to a dead member)
            is offered it again one cycle later, not on its next heartbeat.
    """

    def __init__(
        self,
        topics: Mapping[str, TopicLayout],
        brokers: Sequence[FakeBroker],
        plan: FaultPlan,
        *,
        client_timeout: float,
        event_timeout: float,
        balance_period: float,
    ) -> None:
        self.topics = topics
        self.brokers = brokers
        self.producers: dict[str, float] = {}
        self.groups: dict[str, dict[str, Member]] = {}
        #: Client-balanced group -> its "consume from the max offset" control id (wall ms).
        self.consume_from_max: dict[str, int] = {}
        self.client_timeout = client_timeout
        self.event_timeout = event_timeout
        self.balance_period = balance_period
        self.clock: Callable[[], float] = time.monotonic
        self._rebalance_ids = itertools.count(1)
        handlers = {
            Method.MASTER_PRODUCER_REGISTER: self._producer_register,
            Method.MASTER_PRODUCER_HEARTBEAT: self._producer_heartbeat,
            Method.MASTER_PRODUCER_CLOSE: self._producer_close,
            Method.MASTER_CONSUMER_REGISTER: self._consumer_register,
            Method.MASTER_CONSUMER_HEARTBEAT: self._consumer_heartbeat,
            Method.MASTER_CONSUMER_CLOSE: self._consumer_close,
            Method.MASTER_CONSUMER_REGISTER_V2: self._register_v2,
            Method.MASTER_CONSUMER_HEARTBEAT_V2: self._heartbeat_v2,
            Method.MASTER_CONSUMER_GET_PART_META: self._part_meta,
        }
        responses = {
            Method.MASTER_PRODUCER_REGISTER: pb.RegisterResponseM2P,
            Method.MASTER_PRODUCER_HEARTBEAT: pb.HeartResponseM2P,
            Method.MASTER_PRODUCER_CLOSE: pb.CloseResponseM2P,
            Method.MASTER_CONSUMER_REGISTER: pb.RegisterResponseM2C,
            Method.MASTER_CONSUMER_HEARTBEAT: pb.HeartResponseM2C,
            Method.MASTER_CONSUMER_CLOSE: pb.CloseResponseM2C,
            Method.MASTER_CONSUMER_REGISTER_V2: pb.RegisterResponseM2CV2,
            Method.MASTER_CONSUMER_HEARTBEAT_V2: pb.HeartResponseM2CV2,
            Method.MASTER_CONSUMER_GET_PART_META: pb.GetPartMetaResponseM2C,
        }
        self.node = RpcNode(
            "master",
            {int(m): h for m, h in handlers.items()},
            {int(m): r for m, r in responses.items()},
            plan,
        )

    # ---- shared views ------------------------------------------------------------------------

    def broker_infos(self) -> list[str]:
        """``brokerId:host:port`` of every broker."""
        return [f"{b.broker_id}:{b.address[0]}:{b.address[1]}" for b in self.brokers]

    @property
    def broker_checksum(self) -> int:
        """A checksum of the broker list (changes when a broker moves to another port)."""
        return sum(b.address[1] * 31 + b.broker_id for b in self.brokers) & 0x7FFFFFFF

    def _authorized(self) -> pb.MasterAuthorizedInfo:
        return pb.MasterAuthorizedInfo(visitAuthorizedToken=_VISIT_TOKEN)

    def _missing_topics(self, topics: Sequence[str]) -> list[str]:
        return [t for t in topics if t not in self.topics]

    def partitions_of(self, topics: frozenset[str]) -> list[PartKey]:
        """Every subscribable partition of ``topics``, in a fixed order."""
        return sorted(
            (b.broker_id, t, pid)
            for t in topics
            if (layout := self.topics.get(t)) is not None and layout.accept_subscribe
            for b in self.brokers
            for pid in layout.partition_ids()
        )

    def _expire(self) -> None:
        now = self.clock()
        for cid in [c for c, seen in self.producers.items() if now - seen > self.client_timeout]:
            del self.producers[cid]
        for members in self.groups.values():
            for cid in [c for c, m in members.items() if now - m.last_seen > self.client_timeout]:
                del members[cid]

    # ---- producer ----------------------------------------------------------------------------

    def _producer_register(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestP2M.FromString(request.body)
        if not req.clientId.strip():
            return _refuse(pb.RegisterResponseM2P, 400, "blank clientId")
        self._expire()
        self.producers[req.clientId] = self.clock()
        return pb.RegisterResponseM2P(
            success=True,
            errCode=200,
            errMsg=_OK,
            brokerCheckSum=self.broker_checksum,
            brokerInfos=self.broker_infos(),
            authorizedInfo=self._authorized(),
            appdConfig=pb.ApprovedClientConfig(configId=1),
        ).SerializeToString()

    def _producer_heartbeat(self, request: RpcRequest) -> bytes:
        req = pb.HeartRequestP2M.FromString(request.body)
        self._expire()
        if req.clientId not in self.producers:
            return _refuse(pb.HeartResponseM2P, 411, "producer not registered")
        self.producers[req.clientId] = self.clock()
        checksum = self.broker_checksum
        rsp = pb.HeartResponseM2P(
            success=True,
            errCode=200,
            errMsg=_OK,
            brokerCheckSum=checksum,
            topicInfos=[self._topic_info(t) for t in req.topicList if self._publishable(t)],
            authorizedInfo=self._authorized(),
            appdConfig=pb.ApprovedClientConfig(configId=1),
        )
        if req.brokerCheckSum != checksum:
            rsp.brokerInfos.extend(self.broker_infos())
        return rsp.SerializeToString()

    def _publishable(self, topic: str) -> bool:
        layout = self.topics.get(topic)
        return layout is not None and layout.accept_publish

    def _topic_info(self, topic: str) -> str:
        layout = self.topics[topic]
        items = ",".join(f"{b.broker_id}:{layout.partitions}:{layout.stores}" for b in self.brokers)
        return f"{topic}#{items}#"

    def _producer_close(self, request: RpcRequest) -> bytes:
        req = pb.CloseRequestP2M.FromString(request.body)
        self.producers.pop(req.clientId, None)
        return pb.CloseResponseM2P(success=True, errCode=200, errMsg=_OK).SerializeToString()

    # ---- server-balanced consumer --------------------------------------------------------------

    def _consumer_register(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2M.FromString(request.body)
        cls = pb.RegisterResponseM2C
        missing = self._missing_topics(req.topicList)
        if missing:
            return _refuse(cls, 431, _not_deployed(missing))
        self._expire()
        members = self.groups.setdefault(req.groupName, {})
        if any(m.client_balanced for m in members.values()):
            return _refuse(cls, 424, "group consumes client-balanced")
        member = Member(req.clientId, frozenset(req.topicList), self.clock())
        member.held = _parse_held(req.subscribeInfo)
        members[req.clientId] = member
        return cls(
            success=True, errCode=200, errMsg=_OK, authorizedInfo=self._authorized()
        ).SerializeToString()

    def _consumer_heartbeat(self, request: RpcRequest) -> bytes:
        req = pb.HeartRequestC2M.FromString(request.body)
        cls = pb.HeartResponseM2C
        self._expire()
        members = self.groups.get(req.groupName, {})
        member = members.get(req.clientId)
        if member is None:
            return _refuse(cls, 411, "consumer not registered")
        now = self.clock()
        member.last_seen = now
        pending = member.pending
        if pending is not None and req.HasField("event") and req.event.rebalanceId > 0:
            if pending.op_type == _CONNECT:
                member.held |= pending.parts
            else:
                member.held -= pending.parts
            member.pending = pending = None
        elif pending is not None and now - pending.sent_at > self.event_timeout:
            member.pending = pending = None  # a lost event: give up on it, as the master does
        if req.reportSubscribeInfo and pending is None:
            member.held = _parse_held(req.subscribeInfo)
        rsp = cls(success=True, errCode=200, errMsg=_OK, authorizedInfo=self._authorized())
        if pending is None and now >= member.next_event_at:
            event = self._next_event(req.groupName, member, now)
            if event is not None:
                member.pending = event
                member.next_event_at = now + self.balance_period
                rsp.event.CopyFrom(
                    pb.EventProto(
                        rebalanceId=event.rebalance_id,
                        opType=event.op_type,
                        subscribeInfo=self._subscribe_infos(req.groupName, member, event.parts),
                    )
                )
        return rsp.SerializeToString()

    def assignment(self, group: str) -> dict[str, set[PartKey]]:
        """Where the balancer wants every partition of ``group``: round robin over members."""
        members = sorted(self.groups.get(group, {}).values(), key=lambda m: m.client_id)
        wanted: dict[str, set[PartKey]] = {m.client_id: set() for m in members}
        if not members:
            return wanted
        topics = frozenset().union(*(m.topics for m in members))
        for index, part in enumerate(self.partitions_of(topics)):
            wanted[members[index % len(members)].client_id].add(part)
        return wanted

    def _next_event(self, group: str, member: Member, now: float) -> _Event | None:
        members = self.groups[group]
        wanted = self.assignment(group)
        extra = member.held - wanted[member.client_id]
        if extra:
            return _Event(next(self._rebalance_ids), _DISCONNECT, frozenset(extra), now)
        # Partitions move only once every member released what it must give up (§2.3).
        for other in members.values():
            if (other.pending is not None and other.pending.op_type == _DISCONNECT) or (
                other.held - wanted[other.client_id]
            ):
                return None
        taken = set().union(*(m.held for m in members.values() if m is not member))
        missing = wanted[member.client_id] - member.held - taken
        if missing:
            return _Event(next(self._rebalance_ids), _CONNECT, frozenset(missing), now)
        return None

    def _subscribe_infos(self, group: str, member: Member, parts: frozenset[PartKey]) -> list[str]:
        by_id = {b.broker_id: b for b in self.brokers}
        return [
            f"{member.client_id}@{group}#{bid}:{by_id[bid].address[0]}:{by_id[bid].address[1]}"
            f"#{topic}:{pid}"
            for bid, topic, pid in sorted(parts)
        ]

    def _consumer_close(self, request: RpcRequest) -> bytes:
        req = pb.CloseRequestC2M.FromString(request.body)
        self.groups.get(req.groupName, {}).pop(req.clientId, None)
        return pb.CloseResponseM2C(success=True, errCode=200, errMsg=_OK).SerializeToString()

    # ---- client-balanced consumer (V2) -------------------------------------------------------

    @property
    def broker_config_id(self) -> int:
        """The id of the broker list the V2 calls hand out."""
        return self.broker_checksum

    @property
    def topic_meta_id(self) -> int:
        """The id of the topic metadata the V2 calls hand out."""
        return hash(tuple(sorted(self.topics.items()))) & 0x7FFFFFFF

    def _register_v2(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2MV2.FromString(request.body)
        cls = pb.RegisterResponseM2CV2
        missing = self._missing_topics(req.topicList)
        if missing:
            return cls(errCode=431, errMsg=_not_deployed(missing)).SerializeToString()
        if req.sourceCount > 0 and not 0 <= req.nodeId < req.sourceCount:
            # The real master checks the node id right after the topics, before recording
            # anything (a producer's deployment check relies on that order).
            text = "Request nodeId value must be between in [0, sourceCount-1]!"
            return cls(errCode=400, errMsg=text).SerializeToString()
        self._expire()
        members = self.groups.setdefault(req.groupName, {})
        if any(not m.client_balanced for m in members.values()):
            return cls(errCode=424, errMsg="group consumes server-balanced").SerializeToString()
        members[req.clientId] = Member(
            req.clientId, frozenset(req.topicList), self.clock(), client_balanced=True
        )
        rsp = cls(
            errCode=200,
            errMsg=_OK,
            brokerConfigId=self.broker_config_id,
            authorizedInfo=self._authorized(),
        )
        if req.subRepInfo.brokerConfigId != self.broker_config_id:
            rsp.brokerConfigList.extend(self.broker_infos())
        return rsp.SerializeToString()

    def _v2_member(self, group: str, client_id: str) -> Member | None:
        self._expire()
        member = self.groups.get(group, {}).get(client_id)
        if member is not None:
            member.last_seen = self.clock()
        return member

    def _heartbeat_v2(self, request: RpcRequest) -> bytes:
        req = pb.HeartRequestC2MV2.FromString(request.body)
        rsp = pb.HeartResponseM2CV2(authorizedInfo=self._authorized())
        self._meta_answer(
            rsp,
            req.groupName,
            req.clientId,
            req.subRepInfo.brokerConfigId,
            req.subRepInfo.topicMetaInfoId,
        )
        ctrl = self.consume_from_max.get(req.groupName)
        reported = req.opsTaskInfo.csmFrmMaxOffsetCtrlId
        if rsp.errCode == 200 and ctrl is not None and reported != ctrl:
            rsp.opsTaskInfo.csmFrmMaxOffsetCtrlId = ctrl  # until the client reports it back
        return rsp.SerializeToString()

    def _part_meta(self, request: RpcRequest) -> bytes:
        req = pb.GetPartMetaRequestC2M.FromString(request.body)
        rsp = self._meta_answer(
            pb.GetPartMetaResponseM2C(),
            req.groupName,
            req.clientId,
            req.brokerConfigId,
            req.topicMetaInfoId,
        )
        return rsp.SerializeToString()

    def _meta_answer(
        self,
        rsp: pb.HeartResponseM2CV2 | pb.GetPartMetaResponseM2C,
        group: str,
        client_id: str,
        broker_config_id: int,
        topic_meta_id: int,
    ) -> pb.HeartResponseM2CV2 | pb.GetPartMetaResponseM2C:
        """Fill a V2 heartbeat or metadata answer: 411 for an unknown client, else the ids and
        whichever of broker list and topic metadata the client's ids show it lacks (§8.2, §8.3)."""
        member = self._v2_member(group, client_id)
        if member is None:
            rsp.errCode, rsp.errMsg = 411, "consumer not registered"
            return rsp
        rsp.errCode, rsp.errMsg = 200, _OK
        rsp.brokerConfigId, rsp.topicMetaInfoId = self.broker_config_id, self.topic_meta_id
        if broker_config_id != self.broker_config_id:
            rsp.brokerConfigList.extend(self.broker_infos())
        if topic_meta_id != self.topic_meta_id:
            rsp.topicMetaInfoList.extend(self._topic_meta(member.topics))
        return rsp

    def _topic_meta(self, topics: frozenset[str]) -> list[str]:
        out = []
        for topic in sorted(topics):
            layout = self.topics.get(topic)
            if layout is None:
                continue
            status = 1 if layout.accept_subscribe else 0
            items = ",".join(
                f"{b.broker_id}:{layout.stores}:{layout.partitions}:{status}" for b in self.brokers
            )
            out.append(f"{topic}#{items}")
        return out


def _parse_held(infos: Sequence[str]) -> set[PartKey]:
    held: set[PartKey] = set()
    for text in infos:
        try:
            part = SubscribeInfo.parse(text).partition
        except TubeMQError:
            continue
        held.add((part.broker.broker_id, part.topic, part.partition_id))
    return held


def _not_deployed(missing: list[str]) -> str:
    """The real master's 431 text: every missing topic, as a Java set prints them."""
    return f"Requested topic [[{', '.join(missing)}]] not deployed!"


def _refuse(
    cls: type[pb.RegisterResponseM2P]
    | type[pb.HeartResponseM2P]
    | type[pb.RegisterResponseM2C]
    | type[pb.HeartResponseM2C],
    code: int,
    text: str,
) -> bytes:
    msg = cls(success=False, errCode=code, errMsg=text)
    if isinstance(msg, pb.RegisterResponseM2P | pb.HeartResponseM2P):
        msg.brokerCheckSum = -1
    return msg.SerializeToString()
