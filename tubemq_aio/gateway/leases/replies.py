"""The lease scripts' answers, with a named view for each kind.

Every script answers ``{status, now, values...}`` (a Lua array). :class:`Reply` keeps that shape
(the model comparison tests match it against the pure model's tuples) and names the values:
:meth:`Reply.leased` for an acquire's lease, :attr:`Reply.committed` for the committed offset
that init, record, rewind and settle report, and so on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Leased", "Reply"]


class Leased(NamedTuple):
    """What an acquire answers with a lease (status ``leased``).

    Attributes:
        partition_key: the partition leased.
        committed: its committed offset (None: not started yet).
        lease_expiry: when the lease expires, Redis ms.
        redeliveries: how often the batch at ``committed`` was delivered before.
        start: a pending ``earliest``/``latest`` set by a reset ("" if none).
        cursor: where the group's broker cursor of the partition is believed to be (None:
            unknown).
        fence: the partition's kept-batch fence, handed to this lease only
            (:class:`~tubemq_aio.gateway.leases.model.KeptFence` text; ``""``: none).
    """

    partition_key: str
    committed: int | None
    lease_expiry: int
    redeliveries: int
    start: str
    cursor: int | None
    fence: str = ""


def _offset(value: Any) -> int | None:
    number = int(value)
    return None if number < 0 else number


class Reply(NamedTuple):
    """A script's answer: status, the Redis time it ran at (ms) and the other values."""

    status: str
    now: int
    values: tuple[Any, ...]

    def leased(self) -> Leased:
        """The lease of an acquire answered ``leased``."""
        p, committed, expiry, redeliveries, start, cursor, *fence = self.values
        return Leased(
            str(p),
            _offset(committed),
            int(expiry),
            int(redeliveries),
            str(start),
            _offset(cursor),
            str(fence[0]) if fence else "",
        )

    @property
    def committed(self) -> int | None:
        """The committed offset an ``ok`` init/rewind, a ``released`` record, an ``already`` or a
        finished settle report (None: none yet)."""
        return _offset(self.values[0])

    @property
    def wait_ms(self) -> int:
        """How long to wait: a ``throttled`` or ``held`` acquire's answer."""
        return int(self.values[0])

    @property
    def next_ready_and_expiry(self) -> tuple[int, int]:
        """A ``none`` acquire: when the next partition becomes ready and the next lease expires
        (Redis ms, -1: none)."""
        return int(self.values[0]), int(self.values[1])

    @property
    def ended_as(self) -> str:
        """How an ``already`` settled lease ended: ``acked``, ``nacked`` or ``released``."""
        return str(self.values[1])

    @property
    def lease_expiry(self) -> int:
        """The new expiry an ``ok`` extend reports, Redis ms."""
        return int(self.values[0])
