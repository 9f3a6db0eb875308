"""Public bug reports against protobuf decoders and Kafka clients, second sweep, tried on this
SDK's pieces without a cluster (the FakeCluster ones are in
``tests/fake/test_public_bug_reports_2.py``).

Looked at and judged not applicable:

* googleapis/gapic-generator-python#831 (a new field in a response broke clients generated from
  the older definition): the business messages are parsed by the protobuf runtime, which keeps
  unknown fields, and the compiled fetch parser hands a message with one to it
  (tests/unit/test_speedups.py, ``ODD_RESPONSES``); only the RPC envelope has a reader of its
  own, tried below.
"""

from __future__ import annotations

import pytest

from tubemq_aio.errors import RemoteRpcError, StandbyMasterError
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
