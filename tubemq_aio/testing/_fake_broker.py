"""The fake broker: send (13), consumer register/unregister (15), heartbeat (16), fetch (17),
commit (18), answered the way a real broker does
(docs/protocol/wire.md §5.7, docs/protocol/consumer.md §3, §4, §6)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping

from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.consumer_meta import Partition
from tubemq_aio.protocol.message import checksum
from tubemq_aio.protocol.pb import BrokerService_pb2 as pb
from tubemq_aio.protocol.rpc import Method, RpcRequest
from tubemq_aio.testing._fake_offsets import OffsetTable
from tubemq_aio.testing._fake_rpc import FaultPlan, RpcNode
from tubemq_aio.testing._fake_store import (
    STORE_BASE,
    Registration,
    StoredMessage,
    StoreLog,
    TopicLayout,
)

__all__ = ["FakeBroker"]

_Key = tuple[str, str, int]  # group, topic, partition id
_OP_REGISTER = 31
_OP_UNREGISTER = 32
_READ_FROM_MAX_ALWAYS = 2


class FakeBroker:
    """One in-memory broker of a :class:`~tubemq_aio.testing.FakeCluster`.

    Args:
        broker_id: the id the master announces.
        topics: the cluster's topic layouts (shared, live).
        plan: the cluster's fault rules.
        ids: the cluster-wide message id counter.
        registration_timeout: seconds a consumer's partition registration survives without a
            heartbeat or fetch (the broker's ``consumerRegTimeoutMs``).
        max_batch: most messages one fetch returns.
        max_batch_bytes: about how many payload bytes one fetch returns.
    """

    def __init__(
        self,
        broker_id: int,
        topics: Mapping[str, TopicLayout],
        plan: FaultPlan,
        ids: itertools.count[int],
        *,
        registration_timeout: float,
        max_batch: int,
        max_batch_bytes: int,
    ) -> None:
        self.broker_id = broker_id
        self.topics = topics
        #: The message stores, by ``(topic, store id)``; the partitions of a store share one.
        self.logs: dict[tuple[str, int], StoreLog] = {}
        #: Group offsets; a crash can undo their newest changes (:class:`OffsetTable`).
        self.offsets = OffsetTable(lambda: self.clock())
        #: Monotonic time of the last stop (:meth:`FakeCluster.stop_broker`), else None.
        self.stopped_at: float | None = None
        self.registrations: dict[_Key, Registration] = {}
        self.registration_timeout = registration_timeout
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self._ids = ids
        self.clock: Callable[[], float] = time.monotonic
        self.advertised: str | None = None
        #: Successful fetch answers still to corrupt on the way (one payload byte flipped in
        #: their first message; the stored data stays intact).
        self.corrupt_fetches = 0
        self.corrupt_after = 0  # answers with messages to leave intact before those
        self.corrupted = 0  # answers damaged so far
        handlers = {
            Method.BROKER_PRODUCER_SEND_MESSAGE: self._send,
            Method.BROKER_CONSUMER_REGISTER: self._register,
            Method.BROKER_CONSUMER_HEARTBEAT: self._heartbeat,
            Method.BROKER_CONSUMER_GET_MESSAGE: self._get,
            Method.BROKER_CONSUMER_COMMIT: self._commit,
        }
        responses = {
            Method.BROKER_PRODUCER_SEND_MESSAGE: pb.SendMessageResponseB2P,
            Method.BROKER_CONSUMER_REGISTER: pb.RegisterResponseB2C,
            Method.BROKER_CONSUMER_HEARTBEAT: pb.HeartBeatResponseB2C,
            Method.BROKER_CONSUMER_GET_MESSAGE: pb.GetMessageResponseB2C,
            Method.BROKER_CONSUMER_COMMIT: pb.CommitOffsetResponseB2C,
        }
        self.node = RpcNode(
            f"broker{broker_id}",
            {int(m): h for m, h in handlers.items()},
            {int(m): r for m, r in responses.items()},
            plan,
        )

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the master announces: :attr:`advertised` if set, else its own."""
        if self.advertised is not None:
            host, _, port = self.advertised.rpartition(":")
            return host, int(port)
        return self.node.host, self.node.port

    def log(self, topic: str, partition_id: int) -> StoreLog:
        """The message store ``partition_id`` belongs to (created empty on first use); it holds
        the messages of every partition of that store (``partition_messages`` picks one)."""
        key = (topic, partition_id // STORE_BASE)
        log = self.logs.get(key)
        if log is None:
            log = self.logs[key] = StoreLog()
        return log

    def crash(self, lose_newest: int, lose_offsets: float = 0.0) -> list[StoredMessage]:
        """What a restarted broker has forgotten: every consumer registration with its
        in-flight batch and, killed with SIGKILL, the newest ``lose_newest`` messages of every
        store (not yet flushed) and the group offset changes of the last ``lose_offsets``
        seconds before its stop (not yet in its offset file); the other group offsets stay as
        stored, also those now beyond a store's end.

        Returns:
            The messages forgotten.
        """
        self.registrations.clear()
        if lose_offsets > 0 and self.stopped_at is not None:
            self.offsets.roll_back(self.stopped_at - lose_offsets)
        if not lose_newest:
            return []
        return [m for log in self.logs.values() for m in log.drop_newest(lose_newest)]

    def _has_partition(self, topic: str, partition_id: int) -> bool:
        layout = self.topics.get(topic)
        return layout is not None and layout.has_partition(partition_id)

    def _holder(self, key: _Key) -> Registration | None:
        reg = self.registrations.get(key)
        if reg is not None and self.clock() - reg.last_seen > self.registration_timeout:
            # An expired holder loses its in-flight batch (§3.3).
            del self.registrations[key]
            return None
        return reg

    # ---- producer ----------------------------------------------------------------------------

    def _send(self, request: RpcRequest) -> bytes:
        req = pb.SendMessageRequestP2B.FromString(request.body)
        layout = self.topics.get(req.topicName)
        if layout is None or not layout.accept_publish:
            return _send_fail(403, f"topic {req.topicName} not publishable on this broker")
        if not self._has_partition(req.topicName, req.partitionId):
            return _send_fail(403, f"partition {req.partitionId} out of range")
        if not req.data:
            return _send_fail(400, "empty message data")
        if req.checkSum != -1 and req.checkSum != checksum(req.data):
            return _send_fail(403, "checksum mismatch")
        message_id = next(self._ids)
        stored = self.log(req.topicName, req.partitionId).append(
            message_id, req.data, req.flag, partition_id=req.partitionId
        )
        return pb.SendMessageResponseB2P(
            success=True,
            errCode=200,
            errMsg=str(message_id),
            messageId=message_id,
            appendTime=stored.append_time,
            appendOffset=stored.offset,
        ).SerializeToString()

    # ---- consumer ----------------------------------------------------------------------------

    def _register(self, request: RpcRequest) -> bytes:
        req = pb.RegisterRequestC2B.FromString(request.body)
        key = (req.groupName, req.topicName, req.partitionId)
        if not self._has_partition(req.topicName, req.partitionId):
            return _offset_fail(403, "partition not served by this broker")
        holder = self._holder(key)
        if req.opType == _OP_UNREGISTER:
            if holder is None:
                return _offset_fail(411, "partition not registered")
            if holder.client_id != req.clientId:
                return _offset_fail(412, "partition registered by another consumer")
            self._settle(key, holder, consumed=req.readStatus == 0)
            del self.registrations[key]
            return self._offset_ok(key, pb.RegisterResponseB2C)
        if req.opType != _OP_REGISTER:
            return _offset_fail(400, f"bad opType {req.opType}")
        if holder is not None and holder.client_id != req.clientId:
            return _offset_fail(410, "partition occupied by another consumer")
        log = self.log(req.topicName, req.partitionId)
        stored = self.offsets.get(key)
        if req.readStatus == _READ_FROM_MAX_ALWAYS:
            offset = log.max_offset
        elif req.HasField("currOffset") and req.currOffset >= 0:
            offset = min(max(req.currOffset, log.min_offset), log.max_offset)
        elif stored is not None:
            offset = stored
        else:
            offset = log.min_offset if req.readStatus == 0 else log.max_offset
        self.offsets[key] = offset
        self.registrations[key] = Registration(
            req.clientId, self.clock(), frozenset(req.filterCondStr)
        )
        return self._offset_ok(key, pb.RegisterResponseB2C)

    def _heartbeat(self, request: RpcRequest) -> bytes:
        req = pb.HeartBeatRequestC2B.FromString(request.body)
        failures: list[str] = []
        for text in req.partitionInfo:
            try:
                part = Partition.parse(text)
            except TubeMQError:
                continue
            holder = self._holder((req.groupName, part.topic, part.partition_id))
            if holder is None:
                failures.append(f"411:{text}")
            elif holder.client_id != req.clientId:
                failures.append(f"412:{text}")
            else:
                holder.last_seen = self.clock()
        return pb.HeartBeatResponseB2C(
            success=True,
            errCode=200,
            errMsg="OK!",
            hasPartFailure=bool(failures),
            failureInfo=failures,
        ).SerializeToString()

    def _get(self, request: RpcRequest) -> bytes:
        req = pb.GetMessageRequestC2B.FromString(request.body)
        key = (req.groupName, req.topicName, req.partitionId)
        holder = self._holder(key)
        log = self.log(req.topicName, req.partitionId)
        if holder is None or holder.client_id != req.clientId:
            code = 411 if holder is None else 412
            return _get_fail(code, "partition not registered by this consumer", log.max_offset)
        holder.last_seen = self.clock()
        self._settle(key, holder, consumed=req.lastPackConsumed)
        offset = self.offsets.get(key, log.min_offset)
        if offset < log.min_offset:
            # A group offset below the store's minimum (retention deleted what it pointed
            # at): a real broker moves the group's offset up to the minimum and reads from
            # there (2.4.0 DefaultOffsetManager.getOffset).
            offset = self.offsets[key] = log.min_offset
        if offset > log.max_offset:
            # A group offset beyond the store's end (the broker came back without its tail):
            # a real broker moves the group's offset to the end and answers 404 (2.4.0
            # DefaultOffsetManager.getOffset with updateConsumerOffsets, true by default;
            # docs/protocol/consumer.md §4.2).
            self.offsets[key] = log.max_offset
            return _get_fail(404, "The request offset reached maxOffset!", log.max_offset)
        messages, scanned = log.read(
            offset, req.partitionId, self.max_batch, self.max_batch_bytes, holder.filters
        )
        if not scanned:
            return _get_fail(404, "no new message", log.max_offset)
        if messages:
            holder.in_flight = scanned
        else:  # everything filtered out: the broker commits at once (§4.2)
            self.offsets[key] = offset + scanned
        transferred = [
            pb.TransferedMessage(
                messageId=m.message_id, checkSum=m.checksum, payLoadData=m.payload, flag=m.flag
            )
            for m in messages
        ]
        if transferred and self.corrupt_after > 0:
            self.corrupt_after -= 1
        elif transferred and self.corrupt_fetches > 0:
            self.corrupt_fetches -= 1
            # Damage on the way differs from read to read: another bit each time.
            self.corrupted += 1
            first = transferred[0]
            mask = 1 << (self.corrupted % 8)
            first.payLoadData = bytes([first.payLoadData[0] ^ mask]) + first.payLoadData[1:]
        return pb.GetMessageResponseB2C(
            success=True,
            errCode=200,
            errMsg="OK!",
            messages=transferred,
            currOffset=offset,
            maxOffset=log.max_offset,
            currDataDlt=log.max_offset - offset - scanned,
            minLimitTime=0,
        ).SerializeToString()

    def _commit(self, request: RpcRequest) -> bytes:
        req = pb.CommitOffsetRequestC2B.FromString(request.body)
        key = (req.groupName, req.topicName, req.partitionId)
        holder = self._holder(key)
        if holder is None or holder.client_id != req.clientId:
            return _offset_fail(401, "partition not registered by this consumer", commit=True)
        self._settle(key, holder, consumed=req.lastPackConsumed)
        return self._offset_ok(key, pb.CommitOffsetResponseB2C)

    def _settle(self, key: _Key, holder: Registration, *, consumed: bool) -> None:
        """Commit (``consumed``) or discard the in-flight batch of ``key``."""
        if consumed and holder.in_flight:
            self.offsets[key] = self.offsets.get(key, 0) + holder.in_flight
        holder.in_flight = 0

    def _offset_ok(
        self, key: _Key, cls: type[pb.RegisterResponseB2C] | type[pb.CommitOffsetResponseB2C]
    ) -> bytes:
        log = self.log(key[1], key[2])
        offset = self.offsets.get(key, log.min_offset)
        return cls(
            success=True, errCode=200, errMsg="OK!", currOffset=offset, maxOffset=log.max_offset
        ).SerializeToString()


def _send_fail(code: int, text: str) -> bytes:
    return pb.SendMessageResponseB2P(success=False, errCode=code, errMsg=text).SerializeToString()


def _offset_fail(code: int, text: str, *, commit: bool = False) -> bytes:
    cls = pb.CommitOffsetResponseB2C if commit else pb.RegisterResponseB2C
    return cls(success=False, errCode=code, errMsg=text).SerializeToString()


def _get_fail(code: int, text: str, max_offset: int) -> bytes:
    return pb.GetMessageResponseB2C(
        success=False,
        errCode=code,
        errMsg=text,
        currOffset=-1,
        maxOffset=max_offset,
        currDataDlt=-1,
        minLimitTime=0,
    ).SerializeToString()
