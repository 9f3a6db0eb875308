"""The fetch answer's message JSON straight from the broker's raw batch (``fetched_messages``):
the screening keeps, counts and logs what ``decode_raw_messages`` does, and the encoder gives the
bytes ``orjson.dumps(messages_json(...))`` gives for the decoded messages, in pure Python and
compiled alike, on random batches (attributes, empty and non-UTF-8 bodies, damaged messages)."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.speedup_impls import EXT
from tubemq_aio import accelerator
from tubemq_aio.consumer.toolkit import (
    attribute_cache,
    attribute_info,
    crc_address,
    decode_raw_messages,
)
from tubemq_aio.gateway.http.deps import messages_fragment, messages_json
from tubemq_aio.gateway.tubemq import fetched_messages as fm
from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages
from tubemq_aio.models import Message
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import crc32


class Counters:
    def __init__(self) -> None:
        self.crc_mismatches = self.decode_errors = self.filtered = 0

    def values(self) -> tuple[int, int, int]:
        return self.crc_mismatches, self.decode_errors, self.filtered


def _compiled(address: int | None = None) -> Any:
    assert EXT is not None
    return EXT.MessageJson(
        crc32,
        attribute_cache,
        attribute_info,
        fm.log,
        fm.block_tail,
        fm._tails,
        fm.screen_raw_messages_py,
        fm.encode_messages_json_py,
        crc_address() if address is None else address,
    )


Screen = Callable[..., tuple[RawMessage, ...]]
Encode = Callable[[Any, bool], bytes]
SCREENS: list[Any] = [pytest.param(fm.screen_raw_messages_py, id="pure")]
ENCODES: list[Any] = [pytest.param(fm.encode_messages_json_py, id="pure")]
if EXT is not None:
    SCREENS.append(pytest.param(_compiled().screen, id="compiled"))
    SCREENS.append(pytest.param(_compiled(0).screen, id="compiled-python-crc"))
    ENCODES.append(pytest.param(_compiled().encode, id="compiled"))


def test_the_compiled_twin_is_used_when_built() -> None:
    if os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0"):
        assert EXT is not None, "build the accelerator"
        assert hasattr(EXT, "MessageJson"), "rebuild the accelerator"
    if accelerator.compiled() is not None:
        assert isinstance(fm._twin, type(_compiled()))
    else:
        assert fm._twin is None


# ---- random batches ----------------------------------------------------------------------------

_TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters=",=$"), min_size=1, max_size=6
)
_BLOCKS = st.one_of(
    st.just(b""),
    st.builds(
        lambda items, msg_type, when: ",".join(
            ([f"$msgType$={msg_type}"] if msg_type else [])
            + ([f"$msgTime$={when}"] if when else [])
            + [f"{k}={v}" for k, v in items]
        ).encode(),
        st.lists(st.tuples(_TEXT, _TEXT), max_size=3),
        st.sampled_from(["", "a", "b", "c"]),
        st.sampled_from(["", "202611291705", "209901010000", "notatime"]),
    ),
    st.binary(max_size=12),  # not UTF-8 or not key=value: read as the SDK reads it
)
_BODIES = st.one_of(
    st.binary(max_size=40),  # empty and non-UTF-8 bodies included
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),  # lone surrogates
    st.text(st.characters(max_codepoint=0x7F), max_size=30).map(str.encode),  # controls, " \
    st.sampled_from([b"x" * 100, b'"\\\x00\x1f\x7f/', "é€😀".encode(), b"\xed\xa0\x80"]),
)


@st.composite
def raw_batches(draw: st.DrawFn) -> tuple[RawMessage, ...]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        message_id = draw(st.sampled_from([i, 10**12 + i, -i, 2**63 - 1 - i, -(2**63) + i]))
        body = draw(_BODIES)
        block = draw(_BLOCKS)
        kind = draw(st.sampled_from(["plain", "block", "block", "short", "overlong", "bad_crc"]))
        if kind == "plain":
            payload, flag = body, draw(st.sampled_from([0, 2]))
        elif kind == "short":
            payload, flag = draw(st.binary(max_size=3)), 1
        elif kind == "overlong":
            payload, flag = struct.pack(">i", len(block) + 1 + len(body)) + block + body, 1
        else:
            payload, flag = struct.pack(">i", len(block)) + block + body, 1 | draw(st.just(0))
        expected = crc32(payload) & 0x7FFFFFFF
        if kind == "bad_crc":
            expected ^= 1
        out.append(RawMessage(message_id, expected, payload, flag))
    return tuple(out)


_FILTERS = st.sampled_from([frozenset(), frozenset({"a"}), frozenset({"a", "b"})])


def _decoded(
    raw: tuple[RawMessage, ...], filters: frozenset[str]
) -> tuple[list[Message], Counters]:
    counters = Counters()
    messages, _ = decode_raw_messages(
        raw, topic="t", partition_key="1:t:0", filters=filters, counters=counters
    )
    return messages, counters


@pytest.mark.parametrize("screen", SCREENS)
@given(raw=raw_batches(), filters=_FILTERS)
@settings(max_examples=examples(300), deadline=None)
def test_screening_keeps_and_counts_what_the_decode_keeps(
    screen: Screen, raw: tuple[RawMessage, ...], filters: frozenset[str]
) -> None:
    counters = Counters()
    kept = screen(raw, partition_key="1:t:0", filters=filters, counters=counters)
    messages, expected = _decoded(raw, filters)
    assert type(kept) is tuple
    assert [m[0] for m in kept] == [m.message_id for m in messages]
    assert counters.values() == expected.values()
    if len(kept) == len(raw):
        assert kept is raw  # nothing dropped: no copy


@pytest.mark.parametrize("encode", ENCODES)
@given(raw=raw_batches(), filters=_FILTERS, force=st.booleans())
@settings(max_examples=examples(300), deadline=None)
def test_the_encoder_writes_the_bytes_of_messages_json(
    encode: Encode, raw: tuple[RawMessage, ...], filters: frozenset[str], force: bool
) -> None:
    kept = fm.screen_raw_messages_py(
        raw, partition_key="1:t:0", filters=filters, counters=Counters()
    )
    messages, _ = _decoded(raw, filters)
    old = orjson.dumps(messages_json(messages, force))
    assert encode(kept, force) == old
    assert encode(list(kept), force) == old
    assert orjson.loads(old) == orjson.loads(encode(kept, force))  # and it is JSON


def test_each_body_form_and_the_attribute_fields_are_written_as_before() -> None:
    block = b'$msgType$=a,$msgTime$=202611291705,k=v"\\'
    raw = tuple(
        RawMessage(i, crc32(p) & 0x7FFFFFFF, p, f)
        for i, (p, f) in enumerate(
            [
                (b"plain", 0),
                (b"", 0),
                (b"\xff\xfe", 0),
                (struct.pack(">i", len(block)) + block + b"tab\there", 1),
                (struct.pack(">i", 0) + b"no block", 1),
            ]
        )
    )
    got = orjson.loads(FetchedMessages("t", "1:t:0", raw).json(False))
    assert [(m["value"], m["encoding"]) for m in got] == [
        ("plain", "utf8"),
        ("", "utf8"),
        ("//4=", "base64"),
        ("tab\there", "utf8"),
        ("no block", "utf8"),
    ]
    assert got[3]["attributes"] == {"k": 'v"\\'}
    assert (got[3]["msg_type"], got[3]["msg_time"]) == ("a", "202611291705")
    assert (got[0]["attributes"], got[0]["msg_type"], got[0]["msg_time"]) == ({}, "", None)
    assert [m["message_id"] for m in got] == ["0", "1", "2", "3", "4"]
    assert [m["encoding"] for m in orjson.loads(FetchedMessages("t", "k", raw).json(True))] == [
        "base64"
    ] * 5


@pytest.mark.parametrize("screen", SCREENS)
def test_dropped_messages_are_logged_as_the_decode_logs_them(
    screen: Screen, caplog: pytest.LogCaptureFixture
) -> None:
    raw = (
        RawMessage(7, 0, b"\x00\x00\x00\x09ab", 1),  # the block does not fit
        RawMessage(8, 1, b"body", 0),  # checksum mismatch
    )
    with caplog.at_level(logging.WARNING, "tubemq_aio.consumer"):
        _decoded(raw, frozenset())
        decode_lines = [r.getMessage() for r in caplog.records]
        caplog.clear()
        assert screen(raw, partition_key="1:t:0", filters=frozenset(), counters=Counters()) == ()
        assert [r.getMessage() for r in caplog.records] == decode_lines
    assert len(decode_lines) == 2


@pytest.mark.parametrize("encode", ENCODES)
def test_an_unscreened_block_that_does_not_fit_is_a_value_error(encode: Encode) -> None:
    with pytest.raises(ValueError, match="attribute block does not fit"):
        encode((RawMessage(1, 0, b"\x00\x00\x00\x09ab", 1),), False)
    with pytest.raises(ValueError, match="attribute block does not fit"):
        encode((RawMessage(1, 0, b"\x00\x00", 1),), False)
    with pytest.raises(ValueError, match="attribute block does not fit"):
        encode((RawMessage(1, 0, b"\xff\xff\xff\xff", 1),), False)


@pytest.mark.parametrize("encode", ENCODES)
def test_other_shapes_go_the_pure_way_with_its_errors(encode: Encode) -> None:
    assert encode((), False) == b"[]"
    one = b'[{"message_id":"5","value":"x","encoding":"utf8",'
    assert (
        encode([(5, 0, b"x", 0)], False) == one + b'"attributes":{},"msg_type":"","msg_time":null}]'
    )

    with pytest.raises((TypeError, ValueError)):
        encode([(5, 0, "not bytes", 0)], False)
    with pytest.raises((TypeError, ValueError)):
        encode([(5, 0, b"x")], False)
    with pytest.raises(TypeError):
        encode(None, False)


@pytest.mark.parametrize("encode", ENCODES)
@pytest.mark.parametrize(
    "flag", [0, 1, 2, 3, -1, -2, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**64 + 1, -(2**70)]
)
def test_the_flag_bit_is_read_as_python_reads_it_at_any_size(encode: Encode, flag: int) -> None:
    blocks = (b"k=v", b"") if flag & 1 else (None, None)
    bodies = (b"body", b"")
    raw = tuple(
        RawMessage(message_id, crc32(p) & 0x7FFFFFFF, p, flag)
        for message_id, p in zip(
            (-(2**63), 2**63 - 1),
            (
                body if block is None else struct.pack(">i", len(block)) + block + body
                for block, body in zip(blocks, bodies, strict=True)
            ),
            strict=True,
        )
    )
    assert encode(raw, False) == fm.encode_messages_json_py(raw, False)
    if flag & 1:
        assert orjson.loads(encode(raw, False))[0]["attributes"] == {"k": "v"}


@pytest.mark.parametrize("encode", ENCODES)
def test_a_large_batch_and_the_tail_cache_emptied_mid_batch(encode: Encode) -> None:
    raw = []
    for i in range(3000):  # more distinct blocks than the tail cache holds
        block = f"k={i % 1500}".encode()
        payload = struct.pack(">i", len(block)) + block + b"y" * (i % 7)
        raw.append(RawMessage(i, crc32(payload) & 0x7FFFFFFF, payload, 1))
    messages, _ = _decoded(tuple(raw), frozenset())
    assert encode(tuple(raw), False) == orjson.dumps(messages_json(messages, False))


# ---- the sequence and the answer ---------------------------------------------------------------


def test_fetched_messages_are_the_decoded_messages_for_every_other_reader() -> None:
    raw = tuple(RawMessage(i, crc32(b"m%d" % i) & 0x7FFFFFFF, b"m%d" % i, 0) for i in range(5))
    got = FetchedMessages("t", "1:t:0", raw)
    messages, _ = _decoded(raw, frozenset())
    assert len(got) == 5
    assert list(got) == messages
    assert got[0] == messages[0]
    assert got[-1].body == b"m4"
    assert got[1:3] == tuple(messages[1:3])
    assert got == tuple(messages)
    assert got == messages
    assert got != "x"
    assert got[0].partition_key == "1:t:0"
    assert got[0].topic == "t"
    assert "5 messages" in repr(got)
    with pytest.raises(TypeError):
        hash(got)


@given(raw=raw_batches(), force=st.booleans())
@settings(max_examples=examples(100), deadline=None)
def test_the_answer_fragment_is_the_same_for_either_form(
    raw: tuple[RawMessage, ...], force: bool
) -> None:
    kept = fm.screen_raw_messages(
        raw, partition_key="1:t:0", filters=frozenset(), counters=Counters()
    )
    fetched = FetchedMessages("t", "1:t:0", kept)
    decoded = list(fetched)
    fast = orjson.dumps({"status": "ok", "messages": messages_fragment(fetched, force)})
    slow = orjson.dumps({"status": "ok", "messages": messages_fragment(decoded, force)})
    assert fast == slow == orjson.dumps({"status": "ok", "messages": messages_json(decoded, force)})


@pytest.mark.parametrize("screen", SCREENS)
def test_checksums_and_flags_beyond_64_bits_are_read_as_python_reads_them(screen: Screen) -> None:
    body = struct.pack(">i", 1) + b"k" + b"body"
    good = crc32(body) & 0x7FFFFFFF
    raw = (
        RawMessage(1, 2**70, b"x", 0),  # no checksum matches
        RawMessage(2, good, body, 2**70 + 1),  # the attribute flag, far up
        RawMessage(3, good + 2**64, body, 1),  # equal in 64 bits only
        RawMessage(4, crc32(b"x") & 0x7FFFFFFF, b"x", -(2**70)),  # even: no block
        RawMessage(5, -1, b"x", 0),
    )
    counters = Counters()
    kept = screen(raw, partition_key="1:t:0", filters=frozenset(), counters=counters)
    messages, expected = _decoded(raw, frozenset())
    assert [m[0] for m in kept] == [m.message_id for m in messages] == [2, 4]
    assert counters.values() == expected.values() == (3, 0, 0)
