"""Small in-memory stand-ins for the gateway's engine and producer (HTTP-layer unit tests only).

The engine follows the consume-engine contract: one lease per (scope, partition), acks by lease
id, ``already_acked`` for a retry, 409 errors for a stale or conflicting lease. The end-to-end
tests use the real Redis/TubeMQ engine instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import httpx
from fastapi import FastAPI

from tubemq_aio.errors import SendOutcomeUnknownError, SendWindowFullError, TubeMQError
from tubemq_aio.gateway import GatewayConfig, create_app
from tubemq_aio.gateway.engine.data import (
    FetchOutcome,
    FetchQuery,
    GatewayStats,
    LagEntry,
    LagReport,
    Lease,
    ResetEntry,
)
from tubemq_aio.gateway.engine.port import PiggybackAcks, SettleAction, SettleResult
from tubemq_aio.gateway.errors import (
    InvalidRequestError,
    LeaseStaleError,
    StoreUnavailableError,
    UnknownGroupError,
)
from tubemq_aio.gateway.leases.lease_key import LeaseKey
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer
from tubemq_aio.protocol.producer_send import SendResult
from tubemq_aio.protocol.time_search import target_minute

#: Headers of the admin key and of a reader key (``consume:g*`` only) of :data:`CFG`.
ADMIN = {"Authorization": "Bearer k-admin-1"}
READER = {"Authorization": "Bearer k-reader-1"}  # consume:g* only
#: A JSON content type the edge takes but the direct route does not (a spelling outside
#: ``DIRECT_CONTENT_TYPES``): its requests go through FastAPI's own handler, for tests that
#: compare the two ways a body is read.
FASTAPI_JSON = 'application/json; charset="utf-8"'
CFG = GatewayConfig.from_mapping(
    {
        "masters": "127.0.0.1:1",
        "redis": "redis://127.0.0.1:1/0",
        "secret": "0123456789abcdef0123",
        "produce_topics": ["demo"],
        "max_batch": 50,
        "max_body_bytes": 64 * 1024,
        "groups": [
            {"name": "g1", "topics": ["demo"]},
            {"name": "gb", "topics": ["demo"], "mode": "broadcast"},
            {"name": "other", "topics": ["demo"]},
        ],
        "keys": [
            {"key": "k-admin-1", "scopes": ["produce:*", "consume:*", "admin:*"]},
            {"key": "k-reader-1", "scopes": ["consume:g*"]},
        ],
    }
)


@dataclass(slots=True)
class _Part:
    committed: int = 0
    lease_id: str | None = None
    lease_end: int = 0
    lease_len: int = 0
    redelivery: int = 0
    settled: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)


class FakeEngine:
    """An in-memory consume engine: partitions are lists of messages."""

    def __init__(self, groups: Mapping[str, str], batch: int = 3) -> None:
        self.modes = dict(groups)  # group -> mode
        self.batch = batch
        self.data: dict[str, list[Message]] = {}
        self.parts: dict[tuple[str, str, str], _Part] = {}
        self.paused: set[str] = set()
        self.throttled: set[str] = set()
        self.started = False
        self.closed = False
        self.calls = 0
        self.down = False
        self.draining = False  # drain() was called (the replica is shutting down)
        self.max_messages: list[int | None] = []  # as each fetch asked
        self.owners: list[str] = []  # the API key name of each fetch

    def add(self, partition_key: str, *bodies: bytes, **kw: Any) -> None:
        msgs = self.data.setdefault(partition_key, [])
        for body in bodies:
            msgs.append(
                Message(
                    topic=partition_key.split(":")[1],
                    body=body,
                    message_id=len(msgs) + 1,
                    partition_key=partition_key,
                    **kw,
                )
            )

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    def _now(self) -> int:
        return int(time.time() * 1000)

    def _scope(self, group: str, client_id: str | None) -> str:
        self.calls += 1
        if self.down:
            raise StoreUnavailableError("redis down")
        if group not in self.modes:
            raise UnknownGroupError(group)
        broadcast = self.modes[group] == "broadcast"
        if broadcast and client_id is None:
            raise InvalidRequestError("client_id is required in a broadcast group")
        if not broadcast and client_id is not None:
            raise InvalidRequestError("client_id is not allowed in a clustering group")
        return f"b:{client_id}" if broadcast else "c"

    async def fetch(self, query: FetchQuery, *, acks: PiggybackAcks | None = None) -> FetchOutcome:
        try:
            q = query
            return await self._fetch(q.group, q.client_id, q.lease_ms, q.max_messages, q.owner)
        finally:  # as the engine does: every carried ack has its result when fetch ends
            if acks is not None and acks.pending:
                await acks.settle_each(functools.partial(self.settle, action="ack"))

    async def _fetch(
        self,
        group: str,
        client_id: str | None,
        lease_ms: int | None,
        max_messages: int | None,
        owner: str,
    ) -> FetchOutcome:
        self.max_messages.append(max_messages)
        self.owners.append(owner)
        scope = self._scope(group, client_id)
        if group in self.paused:
            return FetchOutcome("paused", None, ())
        if group in self.throttled:
            return FetchOutcome("throttled", None, (), retry_after_ms=1500)
        now = self._now()
        busy = False
        for pk, msgs in sorted(self.data.items()):
            part = self.parts.setdefault((group, scope, pk), _Part())
            if part.lease_id is not None and part.lease_end > now:
                busy = True
                continue
            if part.lease_id is not None:
                part.redelivery += 1
            if part.committed >= len(msgs):
                continue
            batch = msgs[part.committed : part.committed + self.batch]
            part.lease_id = secrets.token_hex(16)
            part.lease_end = now + (lease_ms or 60_000)
            part.lease_len = len(batch)
            lease = Lease(
                LeaseKey(group, scope, pk, part.lease_id), part.lease_end, part.redelivery
            )
            return FetchOutcome("ok", lease, batch)
        return FetchOutcome("busy" if busy else "empty", None, (), retry_after_ms=200)

    def _part(self, lease: LeaseKey) -> _Part:
        self.calls += 1
        part = self.parts.get((lease.group, lease.scope, lease.partition_key))
        if part is None:
            raise LeaseStaleError("no such lease")
        return part

    async def settle(
        self, lease: LeaseKey, action: SettleAction, *, delay_ms: int = 0
    ) -> SettleResult:
        part = self._part(lease)
        if lease.lease_id in part.settled:
            if action == "ack" and lease.lease_id in part.acked:
                return "already_acked"
            raise LeaseStaleError("already settled")
        if part.lease_id != lease.lease_id:
            raise LeaseStaleError("the lease was taken over")
        if action == "ack":
            part.committed += part.lease_len
            part.redelivery = 0
            part.acked.add(lease.lease_id)
        part.lease_id = None
        part.settled.add(lease.lease_id)
        if action == "ack":
            return "acked"
        return "nacked" if action == "nack" else "released"

    async def extend(self, lease: LeaseKey, lease_ms: int) -> int:
        part = self._part(lease)
        if part.lease_id != lease.lease_id:
            raise LeaseStaleError("the lease was taken over")
        part.lease_end = self._now() + lease_ms
        return part.lease_end

    async def reset(self, group: str, to: Any, *, client_id: str | None = None) -> list[ResetEntry]:
        scope = self._scope(group, client_id)
        out: list[ResetEntry] = []
        for pk, msgs in sorted(self.data.items()):
            part = self.parts.setdefault((group, scope, pk), _Part())
            old = part.committed
            if to == "earliest":
                part.committed = 0
            elif to == "latest":
                part.committed = len(msgs)
            elif isinstance(to, datetime):
                minute = target_minute(to)
                part.committed = next(
                    (i for i, m in enumerate(msgs) if m.msg_time is None or m.msg_time >= minute),
                    len(msgs),
                )
            elif pk in to:
                part.committed = to[pk]
            else:
                continue
            part.lease_id = None
            out.append(ResetEntry(pk, old, part.committed, scope))
        return out

    async def pause(self, group: str) -> None:
        self._scope(group, None if self.modes.get(group) != "broadcast" else "x")
        self.paused.add(group)

    async def resume(self, group: str) -> None:
        self.paused.discard(group)

    async def set_rate(self, group: str, messages_per_second: float, burst: int | None) -> None:
        if messages_per_second:
            self.throttled.add(group)
        else:
            self.throttled.discard(group)

    async def lag(self, group: str, *, client_id: str | None = None) -> LagReport:
        scope = self._scope(group, client_id)
        parts = []
        for pk, msgs in sorted(self.data.items()):
            part = self.parts.get((group, scope, pk), _Part())
            parts.append(LagEntry(pk, part.committed, len(msgs), len(msgs) - part.committed))
        total = sum(p.lag_bytes or 0 for p in parts)
        return LagReport(group, scope, tuple(parts), total)

    async def readiness(self, within: float) -> dict[str, bool]:
        return {"redis": not self.down, "master": True}

    def hints(self) -> dict[str, str]:
        return {}

    def stats(self) -> GatewayStats:
        return GatewayStats(fetches=self.calls)

    def drain(self) -> None:
        self.draining = True


class LongPollEngine(FakeEngine):
    """A :class:`FakeEngine` whose fetches wait their whole ``wait_ms``, then find nothing (a
    long poll, during which the route watches ``receive`` for a disconnect)."""

    async def fetch(self, query: FetchQuery, *, acks: PiggybackAcks | None = None) -> FetchOutcome:
        await asyncio.sleep(query.wait_ms / 1000)
        return FetchOutcome("empty", None, ())


class FakeProducer:
    """Stores sends in a list; bodies starting with ``b"lost"`` time out after writing, those
    starting with ``b"full"`` find the send window full for their whole timeout."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict[str, Any]]] = []
        self.many_calls = 0  # send_many calls (each stores its messages in ``sent`` too)
        self.config = Producer("127.0.0.1:1", send_timeout=10.0).config  # never started
        self.started = False
        self.closed = False
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def send_many(
        self, topic: str, bodies: list[bytes], **kw: Any
    ) -> list[SendResult | TubeMQError]:
        """As the SDK's: a body the topic cannot take refuses the whole call (nothing sent)."""
        for body in bodies:
            self._check(body, kw)
        self.many_calls += 1
        out: list[SendResult | TubeMQError] = []
        for body in bodies:
            try:
                out.append(await self.send(topic, body, **kw))
            except TubeMQError as exc:
                out.append(exc)
        return out

    @staticmethod
    def _check(body: bytes, kw: dict[str, Any]) -> None:
        from tubemq_aio.protocol.message import encode_message

        encode_message(
            body,
            attributes=kw.get("attributes"),
            msg_type=kw.get("msg_type"),
            msg_time=kw.get("msg_time"),
            max_size=1024,
        )

    async def send(self, topic: str, body: bytes, **kw: Any) -> SendResult:
        if body.startswith(b"lost"):
            raise SendOutcomeUnknownError("no answer")
        if body.startswith(b"full"):
            raise SendWindowFullError("all 1 send slots stayed taken (internal detail)")
        self._check(body, kw)
        self.sent.append((topic, body, kw))
        n = next(self._ids)
        return SendResult(
            topic=topic,
            partition_key=f"1:{topic}:0",
            partition_id=0,
            broker_id=1,
            message_id=n,
            append_time=1,
            append_offset=n,
        )


#: The smallest valid gateway configuration (no server behind it): tests add keys to it.
BASE_CONFIG: dict[str, Any] = {
    "masters": "127.0.0.1:1",
    "redis": "redis://127.0.0.1:1/0",
    "secret": "0123456789abcdef0123",
    "produce_topics": ["demo"],
    "groups": [{"name": "g1", "topics": ["demo"]}],
    "keys": [{"key": "k-admin-1", "scopes": ["produce:*", "consume:*", "admin:*"]}],
}


def fake_app(
    engine: Any,
    config: GatewayConfig = CFG,
    *,
    producer: FakeProducer | None = None,
    **options: Any,
) -> FastAPI:
    """The gateway app over ``engine`` (a :class:`FakeEngine` or a subclass) and ``producer``
    (default: a fresh :class:`FakeProducer`); ``options`` go to
    :func:`~tubemq_aio.gateway.create_app`."""
    sender = FakeProducer() if producer is None else producer
    return create_app(
        config,
        engine_factory=lambda _cfg: engine,
        producer_factory=lambda _cfg: cast(Producer, sender),
        **options,
    )


@contextlib.asynccontextmanager
async def app_client(engine: Any, config: GatewayConfig = CFG) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of :func:`fake_app` in this process (its lifespan run; the admin key's
    headers; an app error answered, not raised)."""
    app = fake_app(engine, config)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gw", headers=ADMIN) as client,
    ):
        yield client
