"""The modules of the public surface besides ``tubemq_aio`` itself: what ``docs/api.md`` names,
what the API reference renders and what the guides may import from."""

from __future__ import annotations

PUBLIC_MODULES = (
    "tubemq_aio",
    "tubemq_aio.admin",
    "tubemq_aio.errors",
    "tubemq_aio.gateway",
    "tubemq_aio.spark",
    "tubemq_aio.spark.local",
    "tubemq_aio.tdmsg",
    "tubemq_aio.telemetry",
    "tubemq_aio.testing",
)
