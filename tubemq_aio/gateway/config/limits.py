"""The gateway's hard limits, in one place: the config checks, the engine's checks and the HTTP
body models all read them, so a value the config accepts is never refused later."""

from __future__ import annotations

__all__ = [
    "DEFAULT_TOKEN_CACHE_SIZE",
    "LEASE_MS_CEILING",
    "LEASE_MS_FLOOR",
    "MAX_BATCH_CEILING",
    "MAX_BODY_TIMEOUT_SECONDS",
    "MAX_DELAY_MS",
    "MAX_KEPT_BATCH_BYTES",
    "MAX_SETTING_SECONDS",
    "MAX_TOKEN_CACHE_SIZE",
    "MAX_WAIT_MS",
    "SHUTDOWN_GRACE_SECONDS",
]

#: The shortest lease a group may allow (ms).
LEASE_MS_FLOOR = 100
#: The longest lease a group or a request may ask for (ms): 12 hours.
LEASE_MS_CEILING = 43_200_000
#: The most messages one batch produce request may carry.
MAX_BATCH_CEILING = 500
#: The longest duration (seconds) a timed setting of the config (``rpc_timeout``, ...) may have.
MAX_SETTING_SECONDS = 600.0
#: The longest ``body_timeout`` (seconds): one hour, time for the largest body
#: (``max_body_bytes`` up to 1 GiB) over a link of about 300 KiB/s.
MAX_BODY_TIMEOUT_SECONDS = 3600.0
#: The longest long poll a fetch may ask for (``wait_ms``).
MAX_WAIT_MS = 30_000
#: The most payload bytes of read-ahead batches a replica may keep (``kept_batch_bytes``): 1 TiB.
MAX_KEPT_BATCH_BYTES = 1 << 40
#: Lease tokens a replica remembers issuing by default (``token_cache_size``).
DEFAULT_TOKEN_CACHE_SIZE = 4096
#: The most lease tokens a replica may remember issuing (``token_cache_size``).
MAX_TOKEN_CACHE_SIZE = 1_000_000
#: The longest redelivery delay a nack may ask for (``delay_ms``): one hour.
MAX_DELAY_MS = 3_600_000
#: Seconds a stopping replica's server lets open responses finish before it cancels them (a
#: stream would otherwise hold the shutdown until its ``max_seconds``); a cancelled stream
#: releases its unacked leases.
SHUTDOWN_GRACE_SECONDS = 10
