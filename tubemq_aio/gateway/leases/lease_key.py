"""The one name of a lease: group, scope, partition and lease id."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LeaseKey"]


@dataclass(frozen=True, slots=True)
class LeaseKey:
    """One lease of one partition in one scope of a group: what a lease token carries and what
    every lease script after the acquire is called with.

    Attributes:
        group: the consumer group.
        scope: ``c`` (clustering) or ``b:<client_id>`` (broadcast).
        partition_key: ``brokerId:topic:partitionId``.
        lease_id: the lease's random id (hex); the only authority.
    """

    group: str
    scope: str
    partition_key: str
    lease_id: str
