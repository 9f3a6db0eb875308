"""A TubeMQ address that is a web port: the gateway's own words for it, for every answer.

The SDK recognises a server that answers a TubeMQ frame in HTTP or HTML (a master's web API,
8080 by default, given where its client port, 8715, belongs) and says so in the
:class:`~tubemq_aio.errors.FrameError` it raises (``tubemq_aio/_io/connection.py``). The
gateway withholds exception texts from its clients (they name hosts); this module finds that
case in an error's chain and gives the one text a client, ``/readyz`` and ``tubemq-gateway dev``
may show, which names no host.
"""

from __future__ import annotations

from tubemq_aio.errors import FrameError

__all__ = ["WEB_PORT_HINT", "web_port_hint"]

#: What the SDK's FrameError text says of a server that answered in HTTP or HTML.
_SDK_WORDS = "answered in HTTP or HTML"
#: The gateway's text for that case (no host named).
WEB_PORT_HINT = (
    "a TubeMQ master address of the gateway is a web port (it answered in HTTP): give the "
    "masters' client ports instead (8715 by default; 8080 is a master's web API)"
)


def web_port_hint(exc: BaseException | None) -> str | None:
    """:data:`WEB_PORT_HINT` when ``exc`` or an error it was raised from (``__cause__`` or
    ``__context__``, up to 8 deep) is the SDK's FrameError for an HTTP answer, else None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, FrameError) and _SDK_WORDS in str(exc):
            return WEB_PORT_HINT
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
