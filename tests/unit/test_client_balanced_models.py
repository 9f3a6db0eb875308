"""Pure helpers of the ClientBalancedConsumer (``tubemq_aio.consumer._cb_models``)."""

from __future__ import annotations

import struct
import zlib

import pytest

from tubemq_aio._client import new_client_id
from tubemq_aio.consumer import ClientBalancedConsumer
from tubemq_aio.consumer._cb_models import PartitionMeta, assign_modulo, parse_key
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.errors import ClientBalanceConfigError, ConfigError, UnknownPartitionError
from tubemq_aio.models import Message
from tubemq_aio.protocol.client_balance import java_string_hash
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.consumer_replies import RawMessage


def meta(key: str) -> PartitionMeta:
    broker, topic, part = key.split(":")
    return PartitionMeta(key, topic, "127.0.0.1:8123", int(broker), int(part), True)


KEYS = [f"{b}:demo:{p}" for b in (1, 2) for p in (0, 1, 2)]


def test_assign_modulo_splits_every_key_once_by_java_hash() -> None:
    parts = [assign_modulo([meta(k) for k in KEYS], 3, n) for n in range(3)]
    assert sorted(k for p in parts for k in p) == sorted(KEYS)
    for node, keys in enumerate(parts):
        assert keys == sorted(keys)
        assert all(java_string_hash(k) % 3 == node for k in keys)
    # Strings and metas give the same answer.
    assert assign_modulo(KEYS, 3, 1) == parts[1]
    # Java "abc".hashCode() is 96354.
    assert java_string_hash("abc") == 96354


def test_assign_modulo_and_parse_key_reject_bad_input() -> None:
    with pytest.raises(ClientBalanceConfigError):
        assign_modulo(KEYS, 2, 2)
    with pytest.raises(ClientBalanceConfigError):
        assign_modulo(KEYS, 0, 0)
    with pytest.raises(UnknownPartitionError):
        assign_modulo(["1:demo"], 2, 0)
    with pytest.raises(UnknownPartitionError):
        parse_key("x:demo:0")
    assert isinstance(UnknownPartitionError("k"), ConfigError)
    assert parse_key("3:demo:10001") == PartitionKey(3, "demo", 10001)


def test_consumer_id_has_the_balance_shape() -> None:
    cid = new_client_id("127.0.0.1", group="grp", kind="Balance")
    group, _, rest = cid.rpartition("_")
    assert group == "grp"
    assert rest.startswith("127.0.0.1-")
    assert "-Balance-tubemq-aio-" in rest


def _raw(
    body: bytes, attribute: str | None, message_id: int, *, bad_crc: bool = False
) -> RawMessage:
    if attribute is None:
        payload, flag = body, 0
    else:
        attr = attribute.encode()
        payload, flag = struct.pack(">i", len(attr)) + attr + body, 1
    crc = zlib.crc32(payload) & 0x7FFFFFFF
    return RawMessage(message_id, crc ^ 1 if bad_crc else crc, payload, flag)


def decode_messages(
    key: PartitionKey,
    raw: list[RawMessage],
    filters: frozenset[str],
    stats: ConsumerStats,
    *,
    deliver_corrupt: bool = False,
) -> list[Message]:
    """The decode a positioned read uses, for one partition."""
    messages, _ = decode_raw_messages(
        raw,
        topic=key.topic,
        partition_key=key.format(),
        filters=filters,
        counters=stats,
        deliver_corrupt=deliver_corrupt,
    )
    return messages


def test_decode_messages_filters_and_counts() -> None:
    key = PartitionKey(1, "demo", 0)
    raw = [
        _raw(b"plain", None, 1),
        _raw(b"typed", "$msgType$=even,k=v", 2),
        _raw(b"other", "$msgType$=odd", 3),
        _raw(b"broken", None, 4, bad_crc=True),
        RawMessage(5, 0, b"\x00\x00", 1),  # attribute flag but too short
    ]
    stats = ConsumerStats()
    got = decode_messages(key, raw, frozenset(), stats)
    assert [m.body for m in got] == [b"plain", b"typed", b"other"]
    assert got[1].attributes == {"k": "v"}
    assert got[1].msg_type == "even"
    assert all(m.partition_key == "1:demo:0" and m.topic == "demo" for m in got)
    assert (stats.crc_mismatches, stats.decode_errors) == (1, 1)

    stats = ConsumerStats()
    got = decode_messages(key, raw[:4], frozenset({"even"}), stats, deliver_corrupt=True)
    assert [m.message_id for m in got] == [2]
    assert stats.filtered == 3  # plain and broken have no type, other is "odd"


@pytest.mark.parametrize("codec", [None, "columns", object(), len])
async def test_read_with_refuses_a_codec_that_is_not_one_before_any_io(codec: object) -> None:
    # Never started: the codec is checked first, so nothing is read (or consumed) for it.
    consumer = ClientBalancedConsumer("127.0.0.1:9", group="g1", topics=["t1"])
    with pytest.raises(ClientBalanceConfigError, match="BatchCodec"):
        await consumer.read_with(codec, "1:t1:0", 0)  # type: ignore[arg-type]
