"""Transport settings: one frozen, keyword-only dataclass validated at construction."""

from __future__ import annotations

import math
import ssl
from dataclasses import dataclass, fields

from tubemq_aio.checks import Checks
from tubemq_aio.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from tubemq_aio.protocol.legacy_framing import FRAMINGS, Framing

__all__ = ["TransportSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportSettings:
    """How connections are opened, bounded, timed and reaped.

    Attributes:
        connect_timeout: seconds allowed for TCP connect (plus TLS handshake); Java uses 3 s.
        idle_timeout: a connection without traffic and without pending calls for this many seconds
            is closed by the reaper.
        max_in_flight: calls awaiting a response per connection; further callers wait for room.
        sweep_interval: resolution of the deadline sweeper in seconds.
        max_frame_bytes: largest response payload accepted; larger frames close the connection.
        backoff_initial: delay after the first failed connect attempt to an address, seconds.
        backoff_max: upper bound of the reconnect delay, seconds.
        backoff_multiplier: growth factor of the delay per consecutive failure.
        backoff_jitter: fraction (0..1) of the delay randomised away (full jitter at 1).
        write_high_water: transport write buffer size at which senders are paused.
        write_low_water: buffer size at which paused senders resume.
        close_timeout: seconds a graceful close waits for queued bytes to drain before aborting.
        ssl_context: TLS context for addresses marked ``tls``; ``None`` disables TLS. Each peer's
            certificate is checked against the host this client connects to (the master or
            broker address), as far as the context checks host names: ``check_hostname`` is on
            in ``ssl.create_default_context()``. Turning it off (or ``verify_mode=CERT_NONE``)
            is the explicit, insecure opt-out (any holder of a trusted certificate can
            impersonate every peer).
        tls_server_hostname: one name to send as SNI and check instead of each peer's own host
            (for clusters whose certificates all carry one shared name); ``None`` checks each
            peer against its own host.
        framing: ``"standard"``, or ``"legacy-length"`` for TubeMQ servers 1.1.0 and 1.2.0,
            which put a 4-byte length before every frame (docs/protocol/wire.md §1.7).
        read_coalescing: the share of a connection's owed answers one read may wait for
            (:func:`~tubemq_aio._io.decisions.read_threshold`); 0 = every answer wakes the
            reader at once.
    """

    connect_timeout: float = 3.0
    idle_timeout: float = 180.0
    max_in_flight: int = 1024
    sweep_interval: float = 0.05
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    backoff_initial: float = 0.1
    backoff_max: float = 10.0
    backoff_multiplier: float = 2.0
    backoff_jitter: float = 0.2
    write_high_water: int = 1024 * 1024
    write_low_water: int = 256 * 1024
    close_timeout: float = 1.0
    ssl_context: ssl.SSLContext | None = None
    tls_server_hostname: str | None = None
    framing: Framing = "standard"
    read_coalescing: float = 1 / 32

    def __post_init__(self) -> None:
        checks = Checks("TransportSettings")
        for name in (
            "connect_timeout",
            "idle_timeout",
            "sweep_interval",
            "backoff_initial",
            "backoff_max",
            "close_timeout",
        ):
            checks.seconds(name, getattr(self, name))
        for name in ("max_in_flight", "max_frame_bytes", "write_high_water"):
            checks.integer(name, getattr(self, name), low=1)
        high_water = self.write_high_water if type(self.write_high_water) is int else None
        checks.integer("write_low_water", self.write_low_water, low=0, high=high_water)
        checks.number("backoff_multiplier", self.backoff_multiplier, low=1.0, high=math.inf)
        checks.number("backoff_jitter", self.backoff_jitter, low=0.0, high=1.0)
        checks.number("read_coalescing", self.read_coalescing, low=0.0, high=0.25)
        if checks.ok and self.backoff_max < self.backoff_initial:
            checks.problem("backoff_max must not be smaller than backoff_initial")
        checks.instance("ssl_context", self.ssl_context, ssl.SSLContext, optional=True)
        checks.text("tls_server_hostname", self.tls_server_hostname, optional=True)
        checks.choice("framing", self.framing, FRAMINGS)
        checks.done()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all settings, in declaration order."""
        return tuple(f.name for f in fields(cls))
