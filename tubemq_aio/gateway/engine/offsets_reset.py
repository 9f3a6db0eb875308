"""An offset reset of a group: every scope it reaches, checked partitions, one entry per change.

No broker call: the committed offsets are moved by the ``reset`` script in Redis, and
``earliest``/``latest`` resolve at each partition's next fetch.
"""

from __future__ import annotations

from collections.abc import Sequence

from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine.arguments import scope_of
from tubemq_aio.gateway.engine.data import ResetEntry
from tubemq_aio.gateway.errors import InvalidRequestError
from tubemq_aio.gateway.leases.lease_store import LeaseStore

__all__ = ["reset_offsets"]


async def reset_offsets(
    store: LeaseStore,
    spec: GroupSpec,
    client_id: str | None,
    target: str,
    pairs: Sequence[tuple[str, int]],
    known: Sequence[str],
) -> tuple[list[str], list[ResetEntry]]:
    """Reset the scope of ``client_id`` (in a broadcast group without one: every known client)
    to ``target`` or to each of ``pairs``; ``known`` are the group's partitions.

    Returns:
        The scopes reset and one entry per partition and scope.

    Raises:
        InvalidRequestError: a partition of ``pairs`` is not one of ``known``.
    """
    if spec.mode == "broadcast" and client_id is None:
        scopes = await store.clients(spec.name)
    else:
        scopes = [scope_of(spec, client_id)]
    unknown = [p for p, _ in pairs if p not in known]
    if unknown:  # named in the answer, but not all of them: the keys are the client's text
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        shown = ", ".join(repr(p[:100]) for p in unknown[:3])
        raise InvalidRequestError(f"unknown partitions: {shown}{more}")
    out: list[ResetEntry] = []
    replies = await store.reset_scopes(spec.name, scopes, target, pairs, known)
    for scope, got in zip(scopes, replies, strict=True):
        vals = got.values
        for i in range(0, len(vals), 3):
            new: int | str = vals[i + 2] if target else int(vals[i + 2])
            old = int(vals[i + 1])
            out.append(ResetEntry(str(vals[i]), None if old < 0 else old, new, scope))
    return scopes, out
