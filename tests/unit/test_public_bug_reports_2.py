"""Public bug reports against protobuf decoders, Kafka clients and redis-py, second sweep, tried
on this SDK's pieces without a cluster or a Redis server (the FakeCluster ones are in
``tests/fake/test_public_bug_reports_2.py``).

Looked at and judged not applicable:

* googleapis/gapic-generator-python#831 (a new field in a response broke clients generated from
  the older definition): the business messages are parsed by the protobuf runtime, which keeps
  unknown fields, and the compiled fetch parser hands a message with one to it
  (tests/unit/test_speedups.py, ``ODD_RESPONSES``); only the RPC envelope has a reader of its
  own, tried below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rexc

from tubemq_aio.errors import RemoteRpcError, StandbyMasterError
from tubemq_aio.gateway.errors import GatewayError, StoreUnavailableError
from tubemq_aio.gateway.leases.roundtrips import RoundTrips
from tubemq_aio.protocol.rpc import (
    Method,
    decode_response_py,
    encode_exception,
    encode_success,
    response_decoder,
)
from tubemq_aio.protocol.wire import encode_varint, read_delimited

#: One field of each wire type a proto2 message may carry (number 15, not used by the
#: envelope): varint, 64-bit, length-delimited, 32-bit.
UNKNOWN = {
    "varint": b"\x78" + encode_varint(2**40),
    "fixed64": b"\x79" + bytes(range(8)),
    "bytes": b"\x7a\x03new",
    "fixed32": b"\x7d\x01\x02\x03\x04",
}
DECODERS = [decode_response_py, response_decoder]


def _with_unknown(payload: bytes, field: bytes, where: int) -> bytes:
    """``payload`` (three delimited envelope messages) with ``field`` appended to message
    ``where`` (0: RpcConnHeader, 1: ResponseHeader, 2: the response body)."""
    parts: list[bytes] = []
    pos = 0
    for _ in range(3):
        part, pos = read_delimited(payload, pos)
        parts.append(part)
    assert pos == len(payload)
    parts[where] += field
    return b"".join(encode_varint(len(p)) + p for p in parts)


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("where", [0, 1, 2])
@pytest.mark.parametrize("kind", sorted(UNKNOWN))
def test_unknown_envelope_fields_are_skipped(decode: object, where: int, kind: str) -> None:
    """protobufjs/protobuf.js#36 (a field added to a message by a newer peer made the decoder
    throw instead of skipping it) and googleapis/gapic-generator-python#831: the RPC envelope's
    own reader, and its compiled twin, skip an unknown field of every wire type in each of the
    three envelope messages, of an answer and of a refusal alike."""
    assert callable(decode)
    data = b"\x08\x01\x10\xc8\x01"
    ok = _with_unknown(
        encode_success(Method.BROKER_CONSUMER_GET_MESSAGE, data), UNKNOWN[kind], where
    )
    assert decode(ok) == data
    refusal = encode_exception(
        "org.apache.inlong.tubemq.corerpc.exception.StandbyException", "standby master"
    )
    error = decode(_with_unknown(refusal, UNKNOWN[kind], where))
    assert isinstance(error, StandbyMasterError), error
    assert isinstance(error, RemoteRpcError)
    assert "standby master" in str(error)


class _Trips(RoundTrips):
    """Round trips over a client never connected, counting script reloads."""

    loaded = 0

    async def _load_scripts(self) -> None:
        self.loaded += 1


def _answers(*outcomes: object) -> Callable[[], Awaitable[object]]:
    """A call that raises or returns ``outcomes`` one per attempt."""
    left = list(outcomes)

    async def call() -> object:
        got = left.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got

    return call


LOST = rexc.ConnectionError("Connection closed by server.")
NOSCRIPT = rexc.NoScriptError("No matching script. Please use EVAL.")


@pytest.mark.parametrize(
    ("outcomes", "expected", "round_trips"),
    [
        ((LOST, NOSCRIPT, "ok"), "ok", 3),  # a restarted Redis: dead connection, then no scripts
        ((NOSCRIPT, LOST, "ok"), "ok", 3),
        ((LOST, NOSCRIPT, LOST), StoreUnavailableError, 3),
        ((NOSCRIPT, LOST, NOSCRIPT), GatewayError, 3),
        ((LOST, LOST), StoreUnavailableError, 2),
        ((NOSCRIPT, NOSCRIPT), GatewayError, 2),
    ],
)
async def test_a_lost_connection_and_missing_scripts_each_get_their_retry(
    outcomes: tuple[object, ...], expected: object, round_trips: int
) -> None:
    """redis/redis-py#3034 and aegra/aegra#505 (the first calls after a Redis restart failed):
    the store's round trip retried once whatever the cause, so a restarted Redis (a dead
    pooled connection, then a server without the gateway's scripts) failed the call with
    "Redis lost the gateway scripts". Each cause now has one retry of its own; a second of the
    same cause still ends the call, as before."""
    trips = _Trips(aioredis.Redis(port=9), timeout=1.0)
    call = _answers(*outcomes)
    if isinstance(expected, type):
        with pytest.raises(expected):
            await trips.roundtrip(call)
    else:
        assert await trips.roundtrip(call) == expected
    assert trips.roundtrips == round_trips
    assert trips.loaded == sum(o is NOSCRIPT for o in outcomes[: round_trips - 1])
