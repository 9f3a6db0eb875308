"""The master's "consume from the max offset" control for client-balanced groups.

An operator asks the master to move a client-balanced group to the newest data; the master
then sends an id (the wall time of the request, in ms) as ``OpsTaskInfo.csmFrmMaxOffsetCtrlId``
in its V2 heartbeat answers until the client reports the same id back. A client that sees a new
id later than its own last master register registers each held partition again at its broker
with that partition's known max offset as the bootstrap offset (docs/protocol/consumer.md §8.2;
Java ``RmtDataCache.updOpsTaskInfo`` and ``resetCsmFromMaxOffset``). Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from tubemq_aio.protocol.consumer_meta import META_VALUE_UNDEFINED

__all__ = ["MaxOffsetControl"]


@dataclass(slots=True)
class MaxOffsetControl:
    """What a client-balanced consumer knows of the control.

    Attributes:
        ctrl_id: the last id the master sent (ms; -2 = none yet): reported back in every
            heartbeat's ``OpsTaskInfo`` so the master stops resending it.
        registered_ms: wall time (ms) of the last successful master register; an id at or
            before it is older than this client's session and is only reported back.
        pending: a reset is due and not yet carried out.
    """

    ctrl_id: int = META_VALUE_UNDEFINED
    registered_ms: int = META_VALUE_UNDEFINED
    pending: bool = False

    def registered(self, wall_ms: int) -> None:
        """Record a successful master register at ``wall_ms``."""
        self.registered_ms = wall_ms

    def observe(self, ctrl_id: int | None) -> bool:
        """Take the id of a heartbeat answer (None or negative: absent).

        Returns:
            True when this id asks for a reset (new, and later than the last register); the
            reset then stays :attr:`pending` until :meth:`take`.
        """
        if ctrl_id is None or ctrl_id < 0 or ctrl_id == self.ctrl_id:
            return False
        self.ctrl_id = ctrl_id
        if ctrl_id > self.registered_ms:
            self.pending = True
            return True
        return False

    def take(self) -> bool:
        """True once per due reset (and clears it): the caller carries it out now."""
        due, self.pending = self.pending, False
        return due
