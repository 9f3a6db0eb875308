"""A read-ahead in flight: the state a replica stores before it reads a partition's next batch
after the fetch's answer (off the fetch's critical path; the engine's read-ahead driver sends
them, ``docs/gateway.md``, "Read-ahead off the critical path").

Why it is needed: the broker keeps one batch in flight per group and partition whoever read it,
and the gateway's replicas share one consumer id, so a GetMessage or CommitOffset of one replica
that reaches the broker between another replica's GetMessage and the call that tells that
read's end (its CommitOffset, or the next GetMessage's ``currOffset``) makes the other replica
book a larger batch than it holds: messages skipped without a trace
(``docs/protocol/consumer.md`` §4.2). Requests of different connections are not ordered at the
broker, and a register does not stop a request that arrives after it. A read sent after the
answer has no lease around it (the client may ack at once and another replica lease the
partition), so the partition itself carries the mark: while it is live no acquire hands the
partition out, and its deadline bounds how long a dead replica's read can hold it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReadAhead"]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """The mark of one read-ahead in flight for a partition (at most one per partition).

    The replica writes it in the same Redis round trip as the booking of the batch it
    answers with (``GroupState.read_ahead``), sends the read (a GetMessage and the
    CommitOffset right behind it on the same connection) only after that write succeeded and
    only before ``until``, and aborts its broker connection at ``until`` when the answers have
    not come: so none of the read's requests reaches the broker after ``until``. It ends with
    ``GroupState.read_ahead_done`` (the kept batch's fence and the broker cursor, or nothing),
    or when an acquire finds it past ``until`` (the replica died or stalled: the broker cursor
    is then unknown).

    Attributes:
        token: the replica's id for this read (random, never reused); ``""`` once a reset
            voided it (it still blocks the partition until ``until``, its end books nothing),
            or when a reset wrote it for a lease it cleared whose holder may still be reading
            (``until`` is then that lease's expiry, or the voided read's deadline if later).
        until: the read's deadline, in ms of the Redis clock (``now`` of the script that
            stored it plus the read's allowance).
    """

    token: str
    until: int

    def text(self) -> str:
        """``"<token>|<until>"``, the form Redis stores."""
        return f"{self.token}|{self.until}"

    @classmethod
    def parse(cls, text: str) -> ReadAhead:
        """The mark stored as ``text`` (:meth:`text`).

        Raises:
            ValueError: ``text`` is not ``"<token>|<until>"`` with an integer ``until``.
        """
        token, bar, until = text.rpartition("|")
        if not bar or not (until.isascii() and until.lstrip("-").isdigit()):
            raise ValueError(f"not a read-ahead mark: {text!r}")
        return cls(token, int(until))

    def live(self, now: int) -> bool:
        """Whether the read may still reach the broker at ``now`` (ms, Redis clock)."""
        return now < self.until
