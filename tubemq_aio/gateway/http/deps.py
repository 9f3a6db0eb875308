"""Per-app runtime state and the FastAPI dependencies every route shares."""

from __future__ import annotations

import base64
import contextlib
from collections import Counter
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

import orjson
from fastapi import Depends, Request
from fastapi.responses import Response
from fastapi.security import HTTPBearer

from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.tables import ApiKey, GroupConfig, GroupSpec
from tubemq_aio.gateway.engine.port import ConsumeEngine
from tubemq_aio.gateway.engine.streams import StreamHub
from tubemq_aio.gateway.engine.tokens import LeaseTokens
from tubemq_aio.gateway.errors import NotReadyError, TooManyWaitersError, UnknownGroupError
from tubemq_aio.gateway.http.api_errors import ApiError, answer_for
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.metrics import GatewayMetrics
from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages
from tubemq_aio.gateway.tubemq.master_reach import MasterReach
from tubemq_aio.gateway.tubemq.topic_offsets import TopicOffsets, TopicPartition
from tubemq_aio.models import Message
from tubemq_aio.producer import Producer

__all__ = [
    "AdminGroup",
    "ConsumeGroup",
    "Gateway",
    "GatewayDep",
    "GroupAccess",
    "Principal",
    "ReaderGroup",
    "json_response",
    "messages_fragment",
    "messages_json",
]

_T = TypeVar("_T")


@dataclass(slots=True)
class Gateway:
    """What one replica holds while it runs (``app.state.gateway``).

    Attributes:
        config: the validated configuration.
        replica: this replica's opaque id (the lease holder label; its host and process id
            are only in the start-up log).
        auth: the API-key checker.
        streams: the streaming consumes this replica serves (their tasks and windows).
        tokens: the lease tokens it issues and checks (its secret, the ones it issued).
        metrics: the replica's Prometheus metrics.
        producer: the SDK producer (None without ``produce_topics`` or before start).
        engine: the consume engine (None without groups or before start).
        long_polls: long polls running now per principal name.
        topic_offsets: reads a topic's partitions and offsets (None before start).
        reach: the master probe that lets a produce fail fast (None: no probe).
        start_error: what made the start-up (the app's lifespan) fail, None otherwise.
    """

    config: GatewayConfig
    replica: str
    auth: Authenticator
    streams: StreamHub
    tokens: LeaseTokens
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    producer: Producer | None = None
    engine: ConsumeEngine | None = None
    long_polls: Counter[str] = field(default_factory=Counter)
    topic_offsets: TopicOffsets | None = None
    reach: MasterReach | None = None
    start_error: BaseException | None = None

    def group(self, name: str) -> GroupConfig:
        """The configured group ``name``.

        Raises:
            UnknownGroupError: no such group is configured (404).
        """
        group = self.config.group(name)
        if group is None:
            raise UnknownGroupError(f"no group {name!r} is configured")
        return group

    def drain(self) -> None:
        """The server began to shut down: answer the long polls and end the streams now (a
        stream's last event is ``end`` with the reason ``shutdown``) instead of holding the
        shutdown until the server's grace period cuts them; idempotent."""
        self.streams.drain()
        if self.engine is not None:
            self.engine.drain()

    @contextlib.contextmanager
    def long_poll_slot(self, principal: str, wait_ms: int) -> Iterator[None]:
        """Count a fetch that may wait against ``principal``'s share of the long polls.

        Raises:
            TooManyWaitersError: the principal already holds its share (503, retriable).
        """
        if wait_ms <= 0:
            yield
            return
        if self.long_polls[principal] >= self.config.long_poll_share():
            raise TooManyWaitersError("this API key holds its share of long polls on this replica")
        self.long_polls[principal] += 1
        try:
            yield
        finally:
            self.long_polls[principal] -= 1
            if self.long_polls[principal] <= 0:
                del self.long_polls[principal]

    def answer(self, exc: BaseException) -> ApiError:
        """The error answer for ``exc``, its details logged and the answer counted."""
        return answer_for(exc, self.metrics)

    async def produce_guarded(self, work: Awaitable[_T]) -> _T:
        """``await work`` (a send), answered 503 ``tube_unavailable`` at once when no master is
        reachable (see :mod:`~tubemq_aio.gateway.tubemq.master_reach`).

        Raises:
            TubeUnavailableError: no master reachable.
            Exception: what ``work`` raised.
        """
        grace = self.config.produce_fail_fast_ms / 1000
        if self.reach is None or grace <= 0:
            return await work
        return await self.reach.guard(work, grace)

    async def read_topic(self, topic: str) -> list[TopicPartition]:
        """``topic``'s partitions with their offsets now.

        Raises:
            NotReadyError: the replica is not running (503, retriable).
            TubeUnavailableError: the cluster did not answer in time (503, retriable).
        """
        if self.topic_offsets is None:
            raise NotReadyError("the gateway is not running")
        return await self.topic_offsets(topic)

    def require_engine(self) -> ConsumeEngine:
        """The running consume engine.

        Raises:
            NotReadyError: it is not running (503, retriable).
        """
        if self.engine is None:
            raise NotReadyError("the consume engine is not running")
        return self.engine


async def _gateway(request: Request) -> Gateway:
    # async: FastAPI runs a plain ``def`` dependency in a worker thread, a hop per request
    gateway: Gateway = request.app.state.gateway
    return gateway


class _BearerKey(HTTPBearer):
    """The API key of a request: declares the Bearer scheme in the OpenAPI document and checks
    the header with the replica's :class:`Authenticator` (one dependency, no thread hop)."""

    async def __call__(self, request: Request) -> ApiKey:  # type: ignore[override]
        """The principal of ``request``.

        Raises:
            AuthError: no key (and anonymous not allowed), a malformed header or an unknown key.
        """
        gateway: Gateway = request.app.state.gateway
        return gateway.auth.authenticate(request.headers.get("authorization"))


@dataclass(frozen=True, slots=True)
class GroupAccess:
    """A request's principal and the configured group its path names, its scope checked.

    Attributes:
        principal: the API key of the request.
        config: the configured group of the path's ``{group}``.
    """

    principal: ApiKey
    config: GroupConfig

    @property
    def group(self) -> GroupSpec:
        """The group as the consume engine serves it (``config.spec``)."""
        return self.config.spec


class _GroupScope(_BearerKey):
    """The principal of a request on ``/v1/groups/{group}/…`` holding ``action``'s scope on
    that group (``"consume"``, ``"admin"``, or ``"read"``: consume or admin), and the group.
    It declares the same Bearer scheme as :data:`Principal` (the OpenAPI document is
    unchanged) and takes only the request, so the direct JSON route keeps its fast path."""

    def __init__(self, action: str) -> None:
        super().__init__(scheme_name=_SCHEME, auto_error=False, description=_SCHEME_TEXT)
        self.action = action

    async def __call__(self, request: Request) -> GroupAccess:  # type: ignore[override]
        """The principal and the group of ``request``.

        Raises:
            AuthError: no key (and anonymous not allowed), a malformed header or an unknown key.
            ForbiddenScopeError: the key lacks the scope on the group (403).
            UnknownGroupError: no such group is configured (404).
        """
        gateway: Gateway = request.app.state.gateway
        principal = gateway.auth.authenticate(request.headers.get("authorization"))
        name = request.path_params["group"]
        if self.action == "read":
            Authenticator.require_reader(principal, name)
        else:
            Authenticator.require(principal, self.action, name)
        return GroupAccess(principal, gateway.group(name))


_SCHEME = "HTTPBearer"  # the name the published OpenAPI document uses
_SCHEME_TEXT = "Authorization: Bearer <api key>"
GatewayDep = Annotated[Gateway, Depends(_gateway)]
Principal = Annotated[
    ApiKey, Depends(_BearerKey(scheme_name=_SCHEME, auto_error=False, description=_SCHEME_TEXT))
]
#: A request on a group that needs its ``consume:`` scope (401/403/404 otherwise).
ConsumeGroup = Annotated[GroupAccess, Depends(_GroupScope("consume"))]
#: A request on a group that needs its ``admin:`` scope (401/403/404 otherwise).
AdminGroup = Annotated[GroupAccess, Depends(_GroupScope("admin"))]
#: A request reading a group's state: its ``consume:`` or ``admin:`` scope (401/403/404).
ReaderGroup = Annotated[GroupAccess, Depends(_GroupScope("read"))]


#: Stands for "no message before this one" in :func:`messages_json`.
_NOTHING = object()


def json_response(
    content: object, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A pre-serialised JSON response (orjson; no second validation of large bodies)."""
    return Response(
        orjson.dumps(content), status_code=status, media_type="application/json", headers=headers
    )


def messages_fragment(messages: Sequence[Message], force_base64: bool) -> orjson.Fragment:
    """The JSON array of delivered messages, ready for ``orjson.dumps`` to splice in as is.

    Messages of a broker read (:class:`FetchedMessages`) are written straight from their raw
    form, without a ``Message`` or a dict per message; any other sequence goes through
    :func:`messages_json`. Both give the same bytes.
    """
    if isinstance(messages, FetchedMessages):
        return orjson.Fragment(messages.json(force_base64))
    return orjson.Fragment(orjson.dumps(messages_json(messages, force_base64)))


def messages_json(messages: Iterable[Message], force_base64: bool) -> list[dict[str, object]]:
    """Delivered messages as JSON: text when the body is UTF-8 (unless forced), else base64.

    The decoder shares one attributes mapping and one ``msg_time`` object among the messages
    of an attribute block, so their JSON forms are built once per object, not per message;
    a message that shares them with the one before skips even the lookup (the common case).
    """
    out: list[dict[str, object]] = []
    append = out.append
    times: dict[int, str | None] = {}
    attrs: dict[int, dict[str, str]] = {}
    last_when: object = _NOTHING
    last_mapping: object = _NOTHING
    stamp: str | None = None
    plain: dict[str, str] = {}
    b64 = base64.b64encode
    for message in messages:
        body = message.body
        if force_base64:
            value, encoding = b64(body).decode("ascii"), "base64"
        else:
            try:
                value, encoding = body.decode("utf-8"), "utf8"
            except UnicodeDecodeError:
                value, encoding = b64(body).decode("ascii"), "base64"
        when = message.msg_time
        if when is not last_when:
            last_when = when
            if when is None:
                stamp = None
            elif (stamp := times.get(id(when))) is None:
                stamp = times[id(when)] = when.strftime("%Y%m%d%H%M")
        mapping = message.attributes
        if mapping is not last_mapping:
            last_mapping = mapping
            if (known := attrs.get(id(mapping))) is None:
                known = attrs[id(mapping)] = dict(mapping)
            plain = known
        append(
            {
                "message_id": str(message.message_id),
                "value": value,
                "encoding": encoding,
                "attributes": plain,
                "msg_type": message.msg_type,
                "msg_time": stamp,
            }
        )
    return out
