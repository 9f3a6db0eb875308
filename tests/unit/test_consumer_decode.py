"""The fused consume decode loop gives exactly what ``decode_payload`` + ``Message(...)`` give.

Every test runs against the pure loop and, when built, the compiled one.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.message_strategies import stored_messages
from tests.support.speedup_impls import RAW_DECODERS, RawDecode
from tubemq_aio.errors import MessageDecodeError
from tubemq_aio.models import Message
from tubemq_aio.protocol.attributes import parse_msg_time
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import checksum, decode_payload, encode_message


@dataclass
class Counters:
    crc_mismatches: int = 0
    decode_errors: int = 0
    filtered: int = 0


def reference(
    raw: list[RawMessage], filters: frozenset[str], deliver_corrupt: bool
) -> tuple[list[Message], Counters]:
    """The decode as it was before the fused loop (decode_payload, then the dataclass init)."""
    out: list[Message] = []
    counters = Counters()
    for item in raw:
        try:
            d = decode_payload(item.payload, item.flag, item.checksum)
        except MessageDecodeError:
            counters.decode_errors += 1
            continue
        if not d.crc_ok:
            counters.crc_mismatches += 1
            if not deliver_corrupt:
                continue
        if filters and d.msg_type not in filters:
            counters.filtered += 1
            continue
        out.append(
            Message(
                topic="t1",
                body=d.body,
                attributes=d.attributes,
                msg_type=d.msg_type,
                msg_time=parse_msg_time(d.msg_time) if d.msg_time else None,
                message_id=item.message_id,
                partition_key="1:t1:0",
                attribute=d.attribute,
                flag=d.flag,
                crc_ok=d.crc_ok,
            )
        )
    return out, counters


each_impl = pytest.mark.parametrize("decode", RAW_DECODERS)


def fused(
    decode: RawDecode, raw: list[RawMessage], filters: frozenset[str], deliver_corrupt: bool
) -> tuple[list[Message], Counters, int]:
    counters = Counters()
    messages, nbytes = decode(
        raw,
        topic="t1",
        partition_key="1:t1:0",
        filters=filters,
        counters=counters,
        deliver_corrupt=deliver_corrupt,
    )
    return messages, counters, nbytes


def test_checksum_is_zlib_crc32_masked() -> None:
    data = bytes(range(256)) * 40
    assert checksum(b"hello") == 907060870
    assert checksum(data) == zlib.crc32(data) & 0x7FFFFFFF


@each_impl
def test_messages_are_ordinary_equal_frozen_messages(decode: RawDecode) -> None:
    enc = encode_message(b"body", attributes={"k": "v"}, msg_type="order", msg_time="202401011200")
    raw = [RawMessage(7, checksum(enc.data), enc.data, enc.flag)]
    (msg,), counters, nbytes = fused(decode, raw, frozenset(), False)
    (want,), _ = reference(raw, frozenset(), False)
    assert type(msg) is Message
    assert msg == want
    assert repr(msg) == repr(want)
    assert msg.attributes == {"k": "v"}
    assert msg.msg_type == "order"
    assert msg.msg_time is not None
    assert msg.msg_time.year == 2024
    assert nbytes == 4
    assert counters == Counters()
    assert dataclasses.replace(msg, body=b"x").body == b"x"
    try:
        msg.body = b"other"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a decoded Message must stay frozen")


@each_impl
def test_corrupt_undecodable_and_filtered_are_counted(decode: RawDecode) -> None:
    good = encode_message(b"a", msg_type="keep")
    other = encode_message(b"b", msg_type="drop")
    raw = [
        RawMessage(1, checksum(good.data), good.data, good.flag),
        RawMessage(2, checksum(good.data) ^ 1, good.data, good.flag),  # CRC mismatch
        RawMessage(3, 0, b"\x00\x00", 1),  # flagged but shorter than 4 bytes
        RawMessage(4, 0, struct.pack(">i", 99) + b"xy", 1),  # attribute runs past the end
        RawMessage(5, 0, struct.pack(">i", -1) + b"xy", 1),  # negative attribute length
        RawMessage(6, checksum(other.data), other.data, other.flag),  # filtered out
    ]
    for deliver in (False, True):
        got, counters, _ = fused(decode, raw, frozenset({"keep"}), deliver)
        want, want_counters = reference(raw, frozenset({"keep"}), deliver)
        assert got == want
        assert counters == want_counters
        assert counters.decode_errors == 3
        assert counters.filtered == 1
        assert counters.crc_mismatches == 1
        assert [m.message_id for m in got] == ([1, 2] if deliver else [1])
        if deliver:
            assert got[1].crc_ok is False


def raw_messages() -> st.SearchStrategy[RawMessage]:
    return stored_messages().map(lambda m: RawMessage(*m))


@each_impl
@settings(max_examples=examples(300), deadline=None)
@given(
    raw=st.lists(raw_messages(), max_size=12),
    filters=st.sampled_from([frozenset(), frozenset({"a"}), frozenset({"a", "c"})]),
    deliver=st.booleans(),
)
def test_fused_decode_equals_reference(
    decode: RawDecode, raw: list[RawMessage], filters: frozenset[str], deliver: bool
) -> None:
    got, counters, nbytes = fused(decode, raw, filters, deliver)
    want, want_counters = reference(raw, filters, deliver)
    assert got == want
    assert [m.attributes for m in got] == [m.attributes for m in want]
    assert counters == want_counters
    assert nbytes == sum(len(m.body) for m in want)
