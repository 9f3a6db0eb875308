"""The uvicorn server of a replica (``tubemq-gateway serve`` with one worker, and
``tubemq-gateway dev``): when it begins to shut down it first drains the gateway, so that long
polls answer and streams end at once instead of holding the shutdown until uvicorn's
``timeout_graceful_shutdown`` cancels them (a plain-text 500 for each long poll, a stream cut
without its ``end`` event)."""

from __future__ import annotations

import socket

import uvicorn

from tubemq_aio.gateway.http.deps import Gateway

__all__ = ["GatewayServer", "served_gateway"]

#: Layers of ASGI middleware looked through for the gateway app (uvicorn's own wrappers).
_MAX_WRAPPERS = 8


def served_gateway(app: object) -> Gateway | None:
    """The :class:`Gateway` of the app ``app`` is or wraps (through ``.app`` attributes, as
    uvicorn's middleware holds it); None when there is none (an app that mounts the gateway
    under a path of its own: drain it from that app's shutdown)."""
    for _ in range(_MAX_WRAPPERS):
        gateway = getattr(getattr(app, "state", None), "gateway", None)
        if isinstance(gateway, Gateway):
            return gateway
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None


class GatewayServer(uvicorn.Server):
    """A uvicorn server that drains the gateway (:meth:`Gateway.drain`) as its shutdown
    begins, before it waits for open responses."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Drain the gateway, then shut down as uvicorn does."""
        gateway = served_gateway(self.config.loaded_app)
        if gateway is not None:
            gateway.drain()
        await super().shutdown(sockets)
