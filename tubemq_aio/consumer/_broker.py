"""Thin I/O for the consumer's broker RPCs (methods 15–18) and its master RPCs (4–6).

Requests are built and answers parsed by :mod:`tubemq_aio.protocol.consumer_rpc`; this module
only adds the connection, the envelope, the timeout and, per partition, the rest after a call
that got no answer (:class:`~tubemq_aio.consumer._astray.AstrayCalls`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio.auth import TokenState
from tubemq_aio.consumer._astray import AstrayCalls
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol import consumer_rpc as rpc
from tubemq_aio.protocol.consumer_meta import BrokerInfo, Partition
from tubemq_aio.protocol.flow_control import FlowControlState
from tubemq_aio.protocol.rpc import Method

__all__ = ["BrokerRpc"]


class BrokerRpc:
    """Consumer calls to brokers through the transport façade.

    Args:
        rpc: the transport façade (it knows whether broker ports are TLS ports).
        client_id: this consumer's id.
        group: the consumer group.
        tokens: visit/auth tokens from the master (``authInfo`` of register/heartbeat).
        flow: flow-control state (for ``qryPriorityId``).
        timeout: seconds per call.
        astray: the record of calls that may still run at their broker (a consumer's counts
            each in ``stats.late_request_waits``); default: a new one of ``timeout`` that
            counts nothing.

    A call of a partition waits while an earlier call of it that got no answer may still run
    at the broker (:attr:`astray`): a register, a GetMessage or a CommitOffset waits for any
    such call, an unregister for a register or unregister (docs/reliability.md). The fetch
    engine asks :attr:`astray` before a GetMessage and rests the partition's lease instead of
    waiting in the call.
    """

    def __init__(
        self,
        rpc: RpcClient,
        *,
        client_id: str,
        group: str,
        tokens: TokenState,
        flow: FlowControlState,
        timeout: float,
        astray: AstrayCalls | None = None,
    ) -> None:
        self.rpc = rpc
        self.client_id = client_id
        self.group = group
        self.tokens = tokens
        self.flow = flow
        self.timeout = timeout
        #: Calls of each partition that may still run at its broker.
        self.astray = AstrayCalls(timeout) if astray is None else astray

    async def call(self, broker: BrokerInfo, method: Method, body: bytes) -> bytes:
        """Send one request to ``broker``; return the business response bytes."""
        return await self.rpc.call(broker, method, body, self.timeout)

    async def _partition_call(
        self,
        partition: Partition,
        method: Method,
        body: bytes,
        *,
        registration: bool,
        settle_reads: bool = True,
        ordered: bool = True,
        raw: bool = False,
    ) -> bytes:
        """One request about ``partition``, sent once no earlier one of it may still run at the
        broker (only its registrations without ``settle_reads``, none without ``ordered``),
        noted in :attr:`astray` when it ends without an answer."""
        key = partition.key
        # Checked before awaiting: nothing to wait for is the rule on the fetch path.
        if ordered and self.astray.rest(key, registrations_only=not settle_reads) > 0:
            await self.astray.settle(key, registrations_only=not settle_reads)
        try:
            if raw:
                return await self.rpc.call(partition.broker, method, body, self.timeout, raw=True)
            return await self.call(partition.broker, method, body)
        except BaseException as exc:
            self.astray.note(key, exc, registration=registration)
            raise

    async def register(
        self,
        partition: Partition,
        *,
        read_status: int,
        filters: Iterable[str] = (),
        curr_offset: int | None = None,
    ) -> consumer_replies.OffsetResponse:
        """``RegisterRequestC2B`` opType 31 (docs/protocol/consumer.md §3.1), optionally with a
        start offset.

        With ``curr_offset`` the broker starts the group there only with ``read_status`` 0
        (readStatus 2 makes it ignore the offset, §3.2).
        """
        body = rpc.build_broker_register(
            client_id=self.client_id,
            group=self.group,
            key=partition.key,
            start=rpc.RegisterStart(read_status, curr_offset),
            filters=filters,
            qry_priority_id=self.flow.qry_priority_id,
            auth=self.tokens.broker_auth(),
        )
        data = await self._partition_call(
            partition, Method.BROKER_CONSUMER_REGISTER, body, registration=True
        )
        return consumer_replies.parse_offset_response(data)

    async def unregister(
        self, partition: Partition, *, read_status: int, ordered: bool = True
    ) -> consumer_replies.OffsetResponse:
        """``RegisterRequestC2B`` opType 32: 0 commits the last batch, 1 discards it (§3.1).

        Sent once a register of the partition that may still run at the broker had its time,
        unless ``ordered`` is False (the register was cut short before it could be known
        whether it ran: one that is late still wins then, as it would without the unregister).
        """
        body = rpc.build_broker_unregister(
            client_id=self.client_id,
            group=self.group,
            key=partition.key,
            read_status=read_status,
            auth=self.tokens.broker_auth(),
        )
        # A late GetMessage or CommitOffset after the unregister is refused (411/412): only a
        # late register or unregister has to run first.
        data = await self._partition_call(
            partition,
            Method.BROKER_CONSUMER_REGISTER,
            body,
            registration=True,
            settle_reads=False,
            ordered=ordered,
        )
        return consumer_replies.parse_offset_response(data)

    async def heartbeat(
        self, broker: BrokerInfo, partitions: Iterable[Partition]
    ) -> consumer_replies.BrokerHeartbeatResponse:
        """``HeartBeatRequestC2B`` for every partition held on ``broker`` (§3.3)."""
        body = rpc.build_broker_heartbeat(
            client_id=self.client_id,
            group=self.group,
            partition_info=[p.format() for p in partitions],
            qry_priority_id=self.flow.qry_priority_id,
            auth=self.tokens.broker_auth(),
        )
        data = await self.call(broker, Method.BROKER_CONSUMER_HEARTBEAT, body)
        return consumer_replies.parse_broker_heartbeat_response(data)

    async def get_message(
        self, partition: Partition, *, last_pack_consumed: bool, esc_flow_ctrl: bool
    ) -> consumer_replies.GetMessageResponse:
        """``GetMessageRequestC2B`` (§4.1)."""
        data = await self.get_message_data(
            partition, last_pack_consumed=last_pack_consumed, esc_flow_ctrl=esc_flow_ctrl
        )
        return consumer_replies.parse_get_message_response(data)

    async def get_message_data(
        self,
        partition: Partition,
        *,
        last_pack_consumed: bool,
        esc_flow_ctrl: bool,
        raw: bool = False,
    ) -> bytes:
        """``GetMessageRequestC2B`` (§4.1), the answer left unparsed (for a caller with a
        parser of its own); with ``raw`` a plain SUCCESS answer comes back whole, envelope
        included (see :meth:`RpcClient.call <tubemq_aio._io.rpc_client.RpcClient.call>`)."""
        body = rpc.build_get_message(
            client_id=self.client_id,
            group=self.group,
            key=partition.key,
            last_pack_consumed=last_pack_consumed,
            esc_flow_ctrl=esc_flow_ctrl,
        )
        return await self._partition_call(
            partition, Method.BROKER_CONSUMER_GET_MESSAGE, body, registration=False, raw=raw
        )

    async def commit(
        self, partition: Partition, *, consumed: bool
    ) -> consumer_replies.OffsetResponse:
        """``CommitOffsetRequestC2B`` (§6.1): commit (True) or roll back the last batch."""
        body = rpc.build_commit(
            client_id=self.client_id, group=self.group, key=partition.key, consumed=consumed
        )
        data = await self._partition_call(
            partition, Method.BROKER_CONSUMER_COMMIT, body, registration=False
        )
        return consumer_replies.parse_offset_response(data, commit=True)
