"""Whether an address given for the master's web API is a TubeMQ client (RPC) port instead.

A master's client port (8715) or a broker's (8123) reads an HTTP request as frame garbage and
answers nothing, so a listing pointed there would wait the web API's whole timeout. One TubeMQ
request (a master producer heartbeat with an empty body, which every TubeMQ node answers with
an error frame and which changes nothing) tells such a port apart at once: its answer begins
with the frame token (docs/protocol/wire.md §1). A web server answers it in HTTP, and a port
nobody serves refuses it: neither counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from tubemq_aio.protocol.framing import BEGIN_TOKEN, encode_frame
from tubemq_aio.protocol.rpc import SERVICE_OF_METHOD, Method, encode_request

__all__ = ["PROBE_TIMEOUT", "speaks_tubemq"]

#: Seconds the probe waits for the first bytes of an answer (a TubeMQ node answers in
#: milliseconds; a silent server costs the listing this much more).
PROBE_TIMEOUT = 1.0

_TOKEN = struct.pack(">I", BEGIN_TOKEN)
_METHOD = Method.MASTER_PRODUCER_HEARTBEAT
_PROBE = encode_frame(
    1, encode_request(SERVICE_OF_METHOD[_METHOD], _METHOD, round(PROBE_TIMEOUT * 1000), b"")
)


async def speaks_tubemq(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether ``host:port`` answers a TubeMQ request with a TubeMQ frame within ``timeout``
    seconds (False for any other answer, a refused or lost connection, or silence)."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(_PROBE)
                head = await reader.readexactly(len(_TOKEN))
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return head == _TOKEN
