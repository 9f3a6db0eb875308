"""Transport counters: plain integers, read with :meth:`TransportStats.snapshot`."""

from __future__ import annotations

__all__ = ["TransportStats"]


class TransportStats:
    """Counters shared by a pool and its connections.

    Incremented on the event loop thread only, so plain ints suffice.
    """

    __slots__ = (
        "cancelled",
        "connect_failures",
        "connections_closed",
        "connections_opened",
        "connections_reaped",
        "dropped_responses",
        "reconnects",
        "requests_sent",
        "responses",
        "timeouts",
    )

    def __init__(self) -> None:
        self.requests_sent = 0
        self.responses = 0
        self.dropped_responses = 0
        self.timeouts = 0
        self.cancelled = 0
        self.reconnects = 0
        self.connect_failures = 0
        self.connections_opened = 0
        self.connections_closed = 0
        self.connections_reaped = 0

    def snapshot(self) -> dict[str, int]:
        """Return the current value of every counter.

        Returns:
            A new dict from counter name to value.
        """
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"TransportStats({self.snapshot()})"
