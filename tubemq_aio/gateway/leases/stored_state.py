"""Reading a scope's Redis keys back into the pure model's :class:`GroupState`."""

from __future__ import annotations

from typing import Any, NamedTuple

from tubemq_aio.gateway.leases.model import GroupState
from tubemq_aio.gateway.leases.partition_state import PartState, ScopeState

__all__ = ["RawScope", "state_from_redis", "text"]

#: The fields ``<partition>|<name>`` of a scope's hash and the :class:`PartState` attribute
#: each one is (the Redis names are short: they are stored once per partition and scope).
_INT_FIELDS = {
    "cmt": "committed",
    "mx": "max_offset",
    "lexp": "lease_expiry",
    "lat": "leased_at",
    "ls": "batch_start",
    "ln": "batch_end",
    "rc": "redeliveries",
    "zc": "empty_reads",
    "la": "last_ack_at",
}
_TEXT_FIELDS = {"lid": "lease_id", "lh": "holder", "last": "last_settled", "start": "start"}


def text(v: Any) -> Any:
    """A Redis answer's bytes as text (other values as they are)."""
    return v.decode() if isinstance(v, bytes) else v


class RawScope(NamedTuple):
    """The raw answers of one scope's keys, in the order
    :meth:`~tubemq_aio.gateway.leases.lease_store.LeaseStore.dump` reads them."""

    cfg: Any
    tat: Any
    cur: Any
    st: Any
    ready: Any
    leased: Any
    parts: Any
    acq: Any


def state_from_redis(scope: str, raw: RawScope) -> GroupState:
    """The :class:`GroupState` of one scope from the raw answers of its keys (see
    :meth:`~tubemq_aio.gateway.leases.lease_store.LeaseStore.dump`)."""
    cfg, tat, cur, st, ready, leased, parts, acq = raw
    cfg = {text(k): text(v) for k, v in cfg.items()}
    state = GroupState(
        booted="boot" in cfg,
        paused=cfg.get("paused") == "1",
        rate=float(cfg.get("rate", 0.0)),
        burst=int(cfg.get("burst", 0)),
        tat_us=None if tat is None else int(tat),
        rate_hold=cfg.get("rlh"),
    )
    for raw_key, raw_val in cur.items():  # "<p>" → cursor, "<p>|kf" → kept-batch fence,
        p, bar, name = text(raw_key).partition("|")  # "<p>|ra" → read-ahead in flight
        if not bar:
            state.cursor[p] = int(raw_val)
        elif name == "kf":
            state.fence[p] = text(raw_val)
        elif name == "ra":
            state.reading[p] = text(raw_val)
    sc = ScopeState(
        members={text(m) for m in parts},
        ready={text(m): int(s) for m, s in ready},
        leased={text(m): int(s) for m, s in leased},
        acq={text(k): text(v) for k, v in acq.items()},
    )
    for raw_key, raw_val in st.items():
        p, _, name = text(raw_key).rpartition("|")
        value = text(raw_val)
        ps = sc.parts.setdefault(p, PartState())
        if name in _INT_FIELDS:
            setattr(ps, _INT_FIELDS[name], int(value))
        elif name == "gone":
            ps.gone = value == "1"
        elif name in _TEXT_FIELDS:
            setattr(ps, _TEXT_FIELDS[name], value)
    state.scopes[scope] = sc
    return state
