"""Bodies of the listing routes (``GET /v1/topics…``, ``GET /v1/groups…``): the OpenAPI shapes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tubemq_aio.gateway.http.schemas import LagResponse
from tubemq_aio.gateway.http.wire_ints import Int64Text

__all__ = [
    "GroupDetail",
    "GroupLease",
    "GroupList",
    "GroupSummary",
    "PartitionOffsets",
    "TopicDetail",
    "TopicList",
    "TopicSummary",
]


class TopicSummary(BaseModel):
    """A topic this gateway serves, as the caller's key sees it."""

    name: str
    produce: bool = Field(description="the gateway publishes to it (produce_topics)")
    groups: list[str] = Field(description="the configured groups reading it that the key sees")


class TopicList(BaseModel):
    """The topics the caller's key may produce to or read through a group, sorted by name."""

    topics: list[TopicSummary]


class PartitionOffsets(BaseModel):
    """One partition of a topic, with the broker's offsets now."""

    partition_key: str
    broker: str
    partition_id: int
    subscribable: bool
    min_offset: Int64Text
    max_offset: Int64Text


class TopicDetail(TopicSummary):
    """A topic and its partitions."""

    partitions: list[PartitionOffsets]


class GroupSummary(BaseModel):
    """A consumer group this gateway serves."""

    name: str
    topics: list[str]
    mode: Literal["clustering", "broadcast"]


class GroupList(BaseModel):
    """The groups the caller's key may consume from or administer, sorted by name."""

    groups: list[GroupSummary]


class GroupLease(BaseModel):
    """A batch lease held now: which replica's client holds which partition until when."""

    partition_key: str
    holder: str = Field(description="the replica id that granted the lease")
    expires_at: int = Field(description="ms since the epoch, Redis clock")
    redelivery: int


class GroupDetail(GroupSummary):
    """A group's configuration, its live leases and its lag."""

    start: Literal["earliest", "latest"]
    lease_ms: int
    lease_ms_min: int
    lease_ms_max: int
    max_clients: int
    max_redeliveries: int
    dlq_topic: str | None
    leases: list[GroupLease] = Field(
        description="the leases of the scope the lag is for (empty when lag is null)"
    )
    lag: LagResponse | None = Field(
        description="backlog per partition; null in a broadcast group asked without client_id"
    )
