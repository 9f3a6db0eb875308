"""Settings of the streaming consume route (``[stream]``) and of the ``/ui`` page (``ui``)."""

from __future__ import annotations

from dataclasses import dataclass

from tubemq_aio.checks import Checks
from tubemq_aio.gateway.config.limits import MAX_WAIT_MS
from tubemq_aio.gateway.config.toml_table import checked_table

__all__ = ["MAX_STREAM_WINDOW", "StreamConfig"]

#: The largest window of unacked batches a stream may be configured or asked for.
MAX_STREAM_WINDOW = 256
_KEYS = frozenset(
    {
        "window",
        "max_window",
        "wait_ms",
        "heartbeat_seconds",
        "max_seconds",
        "probe_interval_ms",
        "max_streams",
        "release_timeout",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamConfig:
    """``GET /v1/groups/{group}/stream`` (Server-Sent Events), ``[stream]`` in the file.

    Attributes:
        window: unacked batches one stream holds at most by default (a request may ask for
            1 to ``max_window``); a full window waits for acks (or lease expiry) before the
            next fetch.
        max_window: the largest ``window`` a request may ask for (1-256).
        wait_ms: long poll of each fetch under the stream (1-30000 ms); a stream checks for
            its end, and sends its heartbeat, between fetches.
        heartbeat_seconds: an idle stream sends an SSE comment this often (keeps proxies from
            closing it and notices a client that left).
        max_seconds: a stream ends after this long with an ``end`` event (an ``EventSource``
            reconnects by itself); bounds how long a replica's shutdown waits for it.
        probe_interval_ms: how often a full window asks Redis whether its leases were settled
            through another replica (acks through this replica free the window at once).
        max_streams: streams one replica serves at once (more → 503 ``too_many_waiters``);
            each also counts as a long poll of its API key.
        release_timeout: seconds a stream that ended may spend releasing its unacked leases
            (past it they come back when they expire).
    """

    window: int = 4
    max_window: int = 64
    wait_ms: int = 5000
    heartbeat_seconds: float = 15.0
    max_seconds: float = 300.0
    probe_interval_ms: int = 1000
    max_streams: int = 200
    release_timeout: float = 5.0

    def __post_init__(self) -> None:
        checks = Checks("stream")
        checks.integer("stream.max_window", self.max_window, low=1, high=MAX_STREAM_WINDOW)
        window = checks.integer("stream.window", self.window, low=1, high=MAX_STREAM_WINDOW)
        if isinstance(self.max_window, int) and window > self.max_window:
            checks.problem("stream.window must be <= stream.max_window")
        checks.integer("stream.wait_ms", self.wait_ms, low=1, high=MAX_WAIT_MS)
        checks.seconds(
            "stream.heartbeat_seconds", self.heartbeat_seconds, low=0.1, high=600.0, low_open=False
        )
        checks.seconds(
            "stream.max_seconds", self.max_seconds, low=1.0, high=86_400.0, low_open=False
        )
        checks.integer("stream.probe_interval_ms", self.probe_interval_ms, low=50, high=600_000)
        checks.integer("stream.max_streams", self.max_streams, low=0, high=1_000_000)
        checks.seconds(
            "stream.release_timeout", self.release_timeout, low=0.1, high=600.0, low_open=False
        )
        checks.done()

    @classmethod
    def from_mapping(cls, raw: object) -> StreamConfig:
        """Validate a parsed ``[stream]`` table.

        Raises:
            ConfigError: not a table, an unknown key, or an invalid value.
        """
        return cls(**checked_table(raw, "stream", _KEYS))
