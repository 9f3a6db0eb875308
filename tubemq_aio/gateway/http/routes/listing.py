"""What the gateway serves: ``GET /v1/topics``, ``/v1/topics/{topic}``, ``/v1/groups``,
``/v1/groups/{group}``.

The listings name only what this gateway is configured for (``produce_topics`` and the topics
of its ``[[groups]]``), not every topic of the cluster, and only what the caller's key may use:
a topic is visible with a ``produce:`` scope covering it or a ``consume:``/``admin:`` scope on a
group that reads it; a group with a ``consume:`` or ``admin:`` scope on it (as ``…/lag``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.tables import ApiKey, GroupConfig, GroupSpec
from tubemq_aio.gateway.errors import ForbiddenScopeError, UnknownTopicError
from tubemq_aio.gateway.http.auth import Authenticator
from tubemq_aio.gateway.http.deps import GatewayDep, Principal, ReaderGroup, json_response
from tubemq_aio.gateway.http.known_query import KnownQueryRoute
from tubemq_aio.gateway.http.listing_schemas import GroupDetail, GroupList, TopicDetail, TopicList
from tubemq_aio.gateway.http.routes.admin import (
    ClientIdQuery,
    lag_body,
)
from tubemq_aio.gateway.http.schemas import error_responses
from tubemq_aio.gateway.http.wire_ints import int_text

__all__ = ["router", "visible_groups", "visible_topics"]

_ERRORS = error_responses((401, 403, 404, 422, 503))
router = APIRouter(tags=["listing"], responses=_ERRORS, route_class=KnownQueryRoute)


def visible_groups(config: GatewayConfig, principal: ApiKey) -> list[GroupConfig]:
    """The configured groups ``principal`` may consume from or administer, by name."""
    return sorted(
        (g for g in config.groups if Authenticator.sees_group(principal, g.spec.name)),
        key=lambda g: g.spec.name,
    )


def visible_topics(config: GatewayConfig, principal: ApiKey) -> dict[str, dict[str, Any]]:
    """``topic -> {"name", "produce", "groups"}`` for every configured topic ``principal`` may
    produce to or read through a group it sees, sorted by name."""
    seen: dict[str, dict[str, Any]] = {}
    for topic in config.produce_topics:
        if principal.allows("produce", topic):
            seen[topic] = {"name": topic, "produce": True, "groups": []}
    for group in (g.spec for g in visible_groups(config, principal)):
        for topic in group.topics:
            entry = seen.setdefault(topic, {"name": topic, "produce": False, "groups": []})
            entry["produce"] = topic in config.produce_topics and principal.allows("produce", topic)
            entry["groups"].append(group.name)
    return dict(sorted(seen.items()))


@router.get("/v1/topics", operation_id="list_topics", response_model=TopicList)
async def list_topics(gateway: GatewayDep, principal: Principal) -> Response:
    """The topics this gateway serves that the key may produce to or read through a group."""
    return json_response({"topics": list(visible_topics(gateway.config, principal).values())})


@router.get("/v1/topics/{topic}", operation_id="get_topic", response_model=TopicDetail)
async def get_topic(topic: str, gateway: GatewayDep, principal: Principal) -> Response:
    """A topic and its partitions with the broker's offsets now (one master and one broker
    call per partition: a look for people and dashboards, not for every request)."""
    entry = visible_topics(gateway.config, principal).get(topic)
    if entry is None:
        if not principal.allows("produce", topic):
            raise ForbiddenScopeError(f"this key has no scope on the topic {topic!r}")
        raise UnknownTopicError(f"the gateway serves no topic {topic!r}")
    partitions = await gateway.read_topic(topic)
    entry["partitions"] = [
        {
            "partition_key": p.partition_key,
            "broker": p.broker,
            "partition_id": p.partition_id,
            "subscribable": p.subscribable,
            "min_offset": int_text(p.min_offset),
            "max_offset": int_text(p.max_offset),
        }
        for p in partitions
    ]
    return json_response(entry)


def _summary(group: GroupSpec) -> dict[str, Any]:
    return {"name": group.name, "topics": list(group.topics), "mode": group.mode}


@router.get("/v1/groups", operation_id="list_groups", response_model=GroupList)
async def list_groups(gateway: GatewayDep, principal: Principal) -> Response:
    """The groups this gateway serves that the key may consume from or administer."""
    groups = visible_groups(gateway.config, principal)
    return json_response({"groups": [_summary(g.spec) for g in groups]})


@router.get("/v1/groups/{group}", operation_id="get_group", response_model=GroupDetail)
async def get_group(
    group: str,
    gateway: GatewayDep,
    access: ReaderGroup,
    client_id: ClientIdQuery = None,
) -> Response:
    """A group's configuration, the leases held now and the lag (in a broadcast group, of the
    ``client_id`` given; without one ``lag`` is null)."""
    spec = access.group
    body = _summary(spec)
    body.update(
        start=spec.start,
        lease_ms=spec.lease_ms,
        lease_ms_min=spec.lease_ms_min,
        lease_ms_max=spec.lease_ms_max,
        max_clients=spec.max_clients,
        max_redeliveries=access.config.max_redeliveries,
        dlq_topic=access.config.dlq_topic,
    )
    if spec.mode == "broadcast" and client_id is None:
        body.update(leases=[], lag=None)
        return json_response(body)
    lag = lag_body(group, await gateway.require_engine().lag(group, client_id=client_id))
    body["leases"] = [
        {
            "partition_key": p["partition_key"],
            "holder": p["lease_holder"],
            "expires_at": p.get("lease_expires_at") or 0,
            "redelivery": p.get("redelivery") or 0,
        }
        for p in lag["partitions"]
        if p.get("lease_holder")
    ]
    body["lag"] = lag
    return json_response(body)
