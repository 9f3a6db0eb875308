"""How fast a server-balanced consumer answers the master's rebalance events, as a pure rule.

The real master makes events only in its balance cycle (``consumerBalancePeriodMs``, 60 s by
default) and skips a group whose events are unfinished, so one consumer meets a few events a
minute (docs/protocol/consumer.md §2.1, §2.3). The client reports each processed event on an
immediate heartbeat (§12 item 8), so a master that hands out an event on every heartbeat, with
each event failing at once (a broker answering 410 while it still holds a dead member's
partition), would drive the consumer into thousands of heartbeats and broker registers a
second. :class:`EventPacer` bounds that on the client side whatever the server does: an event
starts no sooner than ``min_interval`` after the previous one started, so heartbeats carrying
results and the broker registers of events stay at ``1 / min_interval`` a second at most.

Times are monotonic float seconds (``now``).
"""

from __future__ import annotations

from tubemq_aio.checks import Checks

__all__ = ["DEFAULT_EVENT_MIN_INTERVAL", "EventPacer"]

#: Seconds between the starts of two rebalance events by default: far below any real master's
#: balance cycle (2 s on the local test cluster, 60 s by default), so it never delays a real
#: rebalance by more than this, and it caps a misbehaving master at 2 events a second.
DEFAULT_EVENT_MIN_INTERVAL = 0.5


#: A wait this short (seconds) is none: float rounding of a clock advanced by a wait.
_NO_WAIT = 1e-9


class EventPacer:
    """When the consumer may start on the next rebalance event.

    Args:
        min_interval: seconds from the start of one event to the start of the next (>= 0, finite;
            0 switches the bound off).

    Raises:
        ConfigError: ``min_interval`` is not a finite number of seconds >= 0.
    """

    def __init__(self, min_interval: float = DEFAULT_EVENT_MIN_INTERVAL) -> None:
        c = Checks("EventPacer")
        c.seconds("min_interval", min_interval, high=3600.0, low_open=False)
        c.done()
        self.min_interval = float(min_interval)
        self._last_start: float | None = None

    def __repr__(self) -> str:
        return f"<EventPacer min_interval={self.min_interval} last_start={self._last_start}>"

    def wait(self, now: float) -> float:
        """Seconds to wait from ``now`` before the next event may start (0: start now)."""
        if self._last_start is None:
            return 0.0
        left = self._last_start + self.min_interval - now
        # below a nanosecond it is the rounding of ``now + wait(now)``, not a wait
        return left if left > _NO_WAIT else 0.0

    def started(self, now: float) -> None:
        """Record that an event started at ``now`` (call it once per event processed)."""
        self._last_start = now
