"""Message codec: golden bytes built by hand from docs/protocol/wire.md
(§5.2–5.6, docs/protocol/consumer.md §5), round trips."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tubemq_aio.errors import ConfigError, InvalidMessageError, MessageDecodeError, ProtocolError
from tubemq_aio.models import Message
from tubemq_aio.protocol.attributes import format_msg_time, parse_attributes, parse_msg_time
from tubemq_aio.protocol.message import (
    ATTRIBUTE_FLAG,
    DEFAULT_MAX_MESSAGE_SIZE,
    checksum,
    decode_payload,
    encode_message,
    ip_to_int,
    validate_topic,
)

# docs/protocol/wire.md §5.2 example: attribute "$msgType$=t1,$msgTime$=202401011200", payload
# "hello" (44 bytes).
GOLDEN_DATA = bytes.fromhex(
    "00000023246d736754797065243d74312c246d736754696d65243d32303234303130313132303068656c6c6f"
)


def crc(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


def test_golden_example_from_notes() -> None:
    assert len(GOLDEN_DATA) == 44
    encoded = encode_message(b"hello", msg_type="t1", msg_time="202401011200")
    assert encoded.data == GOLDEN_DATA
    assert encoded.flag == 1
    assert encoded.msg_type == "t1"
    assert encoded.msg_time == "202401011200"


def test_golden_with_datetime_and_user_attributes() -> None:
    attr = b"$msgType$=t1,$msgTime$=202401011200,k=v,a=b"
    expected = struct.pack(">i", len(attr)) + attr + b"xyz"
    encoded = encode_message(
        b"xyz",
        attributes={"k": "v", "a": "b"},
        msg_type="  t1 ",
        msg_time=datetime(2024, 1, 1, 12, 0, 59),
    )
    assert encoded.data == expected
    assert encoded.msg_type == "t1"


def test_no_attribute_means_body_unchanged_and_flag_zero() -> None:
    body = b"payload"
    encoded = encode_message(body)
    assert encoded.data is body  # no copy on the plain path
    assert encoded.flag == 0
    assert (encoded.msg_type, encoded.msg_time) == ("", "")


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_msg_type_and_time_write_nothing(blank: str) -> None:
    encoded = encode_message(b"x", msg_type=blank, msg_time=blank)
    assert (encoded.data, encoded.flag) == (b"x", 0)


def test_user_attributes_only() -> None:
    encoded = encode_message(b"b", attributes={"key": "value"})
    assert encoded.data == b"\x00\x00\x00\x09key=valueb"
    assert encoded.flag == ATTRIBUTE_FLAG
    assert (encoded.msg_type, encoded.msg_time) == ("", "")


def test_bytearray_and_memoryview_bodies_accepted() -> None:
    assert encode_message(bytearray(b"ab")).data == b"ab"
    assert encode_message(memoryview(b"ab")).data == b"ab"


def test_checksum_matches_notes_example() -> None:
    assert checksum(b"hello") == 907060870


@pytest.mark.parametrize(
    ("ip", "value"),
    [
        ("192.168.1.10", -1062731510),
        ("10.1.2.3", 0x0A010203),
        ("0.0.0.0", 0),
        ("255.255.255.255", -1),
    ],
)
def test_ip_to_int(ip: str, value: int) -> None:
    assert ip_to_int(ip) == value


@pytest.mark.parametrize("ip", ["1.2.3", "1.2.3.256", "a.b.c.d", "", "::1"])
def test_ip_to_int_rejects(ip: str) -> None:
    with pytest.raises(InvalidMessageError):
        ip_to_int(ip)


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["text", None, 5, [1, 2]])
def test_non_bytes_body(body: object) -> None:
    with pytest.raises(InvalidMessageError, match="bytes"):
        encode_message(body)  # type: ignore[arg-type]


def test_empty_body() -> None:
    with pytest.raises(InvalidMessageError, match="empty"):
        encode_message(b"")


@pytest.mark.parametrize(
    "attributes",
    [
        {"a,b": "v"},
        {"a=b": "v"},
        {"k": "v,w"},
        {"k": "v=w"},
        {"$msgType$": "v"},
        {"k": "x$msgTime$"},
        {"my$msgType$": "v"},
        {"": "v"},
        {"k": "  "},
        {"k": 1},
        {2: "v"},
    ],
)
def test_bad_attributes(attributes: dict[object, object]) -> None:
    with pytest.raises(InvalidMessageError):
        encode_message(b"x", attributes=attributes)  # type: ignore[arg-type]


def test_unhashable_attribute_value() -> None:
    with pytest.raises(InvalidMessageError):
        encode_message(b"x", attributes={"k": ["v"]})  # type: ignore[dict-item]


@pytest.mark.parametrize("msg_type", ["a,b", "a=b", "x$msgTime$"])
def test_bad_msg_type(msg_type: str) -> None:
    with pytest.raises(InvalidMessageError):
        encode_message(b"x", msg_type=msg_type)


@pytest.mark.parametrize(
    "msg_time", ["2024010112", "202401011260", "202413011200", "2024O1011200", 5]
)
def test_bad_msg_time(msg_time: object) -> None:
    with pytest.raises(InvalidMessageError):
        encode_message(b"x", msg_time=msg_time)  # type: ignore[arg-type]


def test_size_limit_counts_body_and_attribute() -> None:
    encode_message(b"x" * 10, max_size=10)
    with pytest.raises(InvalidMessageError, match="exceeds"):
        encode_message(b"x" * 11, max_size=10)
    # "k=v" is 3 bytes: 7 + 3 fits 10, 8 + 3 does not.
    encode_message(b"x" * 7, attributes={"k": "v"}, max_size=10)
    with pytest.raises(InvalidMessageError, match="exceeds"):
        encode_message(b"x" * 8, attributes={"k": "v"}, max_size=10)


def test_default_max_size_is_one_mib() -> None:
    encode_message(bytes(DEFAULT_MAX_MESSAGE_SIZE))
    with pytest.raises(InvalidMessageError):
        encode_message(bytes(DEFAULT_MAX_MESSAGE_SIZE + 1))


@pytest.mark.parametrize("topic", ["", "   ", "t" * 65, None, 3])
def test_bad_topic(topic: object) -> None:
    with pytest.raises(InvalidMessageError):
        validate_topic(topic)


def test_good_topic_and_error_family() -> None:
    assert validate_topic("t" * 64) == "t" * 64
    assert issubclass(InvalidMessageError, ConfigError)
    assert issubclass(InvalidMessageError, ValueError)
    assert issubclass(MessageDecodeError, ProtocolError)


def test_format_msg_time() -> None:
    assert format_msg_time(datetime(999, 2, 3, 4, 5)) == "099902030405"
    assert format_msg_time(" 202401011200 ") == "202401011200"
    assert parse_msg_time("202402291159") == datetime(2024, 2, 29, 11, 59)
    assert parse_msg_time("202302291159") is None


# --- decoding (docs/protocol/consumer.md §5), payloads built by hand ------------------------------


def test_decode_golden() -> None:
    decoded = decode_payload(GOLDEN_DATA, 1, crc(GOLDEN_DATA))
    assert decoded.body == b"hello"
    assert decoded.attribute == "$msgType$=t1,$msgTime$=202401011200"
    assert decoded.msg_type == "t1"
    assert decoded.msg_time == "202401011200"
    assert dict(decoded.attributes) == {}
    assert decoded.crc_ok


def test_decode_without_flag_keeps_everything_as_body() -> None:
    decoded = decode_payload(GOLDEN_DATA, 0, crc(GOLDEN_DATA))
    assert decoded.body == GOLDEN_DATA
    assert decoded.attribute is None


def test_crc_mismatch_is_reported_not_dropped() -> None:
    decoded = decode_payload(GOLDEN_DATA, 1, crc(GOLDEN_DATA) ^ 1)
    assert not decoded.crc_ok
    assert decoded.body == b"hello"


def test_zero_length_attribute() -> None:
    payload = b"\x00\x00\x00\x00body"
    decoded = decode_payload(payload, 1, crc(payload))
    assert (decoded.body, decoded.attribute) == (b"body", None)


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00\x00\x00", b"\x00\x00\x00\x05abcd", b"\xff\xff\xff\xffabcd"],
)
def test_malformed_attribute_block(payload: bytes) -> None:
    with pytest.raises(MessageDecodeError):
        decode_payload(payload, 1, crc(payload))


def test_parse_attributes_java_rules() -> None:
    user, msg_type, msg_time = parse_attributes(
        "a=1,b=2=3,a=9,=x,noeq,c=,$msgType$=t1,$msgType$=t2,$msgTime$=bad, ,d=4"
    )
    assert user == {"a": "1", "b": "2", "d": "4"}
    assert msg_type == "t2"
    assert msg_time == ""  # the last $msgTime$ is invalid


def test_decode_flag_with_other_bits() -> None:
    attr = b"k=v"
    payload = struct.pack(">i", len(attr)) + attr + b"B"
    decoded = decode_payload(payload, 0b101, crc(payload))
    assert decoded.attributes == {"k": "v"}
    assert decoded.flag == 0b101


# --- round trips ---------------------------------------------------------------------------

_token = st.text(
    alphabet=st.characters(blacklist_characters=",=$", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() != "")


@settings(max_examples=examples(300), deadline=None)
@given(
    body=st.binary(min_size=1, max_size=512),
    attributes=st.dictionaries(_token, _token, max_size=5),
    msg_type=st.none() | _token,
    msg_time=st.none()
    | st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)),
)
def test_round_trip(
    body: bytes,
    attributes: dict[str, str],
    msg_type: str | None,
    msg_time: datetime | None,
) -> None:
    encoded = encode_message(body, attributes=attributes, msg_type=msg_type, msg_time=msg_time)
    decoded = decode_payload(encoded.data, encoded.flag, crc(encoded.data))
    assert decoded.crc_ok
    assert decoded.body == body
    assert dict(decoded.attributes) == attributes
    assert decoded.msg_type == (msg_type.strip() if msg_type else "")
    expected_time = msg_time.replace(second=0, microsecond=0) if msg_time else None
    assert (parse_msg_time(decoded.msg_time) if decoded.msg_time else None) == expected_time
    assert encoded.flag == (1 if attributes or msg_type or msg_time else 0)


@settings(max_examples=examples(300), deadline=None)
@given(payload=st.binary(max_size=64), flag=st.integers(0, 3), check=st.integers(-5, 2**31))
def test_decode_never_crashes(payload: bytes, flag: int, check: int) -> None:
    try:
        decoded = decode_payload(payload, flag, check)
    except MessageDecodeError:
        assert flag & 1
    else:
        assert decoded.crc_ok == (check == crc(payload))


def test_public_message_model_from_payload() -> None:
    attr = b"$msgType$=t1,$msgTime$=202401011200,k=v"
    payload = struct.pack(">i", len(attr)) + attr + b"body"
    decoded = decode_payload(payload, 1, crc(payload))
    msg = Message.from_payload(decoded, topic="t", message_id=9, partition_key="1:t:0")
    assert msg.body == b"body"
    assert msg.attributes == {"k": "v"}
    assert msg.msg_type == "t1"
    assert msg.msg_time == datetime(2024, 1, 1, 12, 0)
    assert (msg.message_id, msg.partition_key, msg.crc_ok, msg.flag) == (9, "1:t:0", True, 1)
    with pytest.raises(TypeError):
        msg.attributes["x"] = "y"  # type: ignore[index]
    plain = Message.from_payload(
        decode_payload(b"b", 0, 0), topic="t", message_id=1, partition_key=""
    )
    assert plain.msg_time is None
    assert not plain.crc_ok
    assert plain.attributes == {}


def test_attribute_cache_keeps_validation() -> None:
    for _ in range(2):  # the second call hits the cache and must still refuse
        with pytest.raises(InvalidMessageError):
            encode_message(b"x", attributes={"a": "b,c"})
        with pytest.raises(InvalidMessageError):
            encode_message(b"x", msg_type=5)  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError):
            encode_message(b"x", msg_type=["a"])  # type: ignore[arg-type]


def test_aware_datetimes_format_their_own_wall_time() -> None:
    from datetime import timedelta, timezone

    utc = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
    plus1 = utc.astimezone(timezone(timedelta(hours=1)))
    assert encode_message(b"x", msg_time=utc).msg_time == "202401011200"
    assert encode_message(b"x", msg_time=plus1).msg_time == "202401011300"


def test_unencodable_attribute_text() -> None:
    with pytest.raises(InvalidMessageError, match="UTF-8"):
        encode_message(b"x", attributes={"k": "\ud800"})
