"""The compiled twins of the produce request path (``PlainSendEncoder``, ``plain_send_args``)
and the compiled answer parser's direct reads of a ``Partition``: used when built, and equal
to the pure code (and the request to the protobuf library's own bytes) on random input."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from tests.support.held_producer import HeldConnection, started_producer
from tests.support.send_requests import build_send_request
from tests.support.speedup_impls import EXT, pure_and_compiled
from tubemq_aio import accelerator
from tubemq_aio.errors import LocalProtocolError
from tubemq_aio.producer import config
from tubemq_aio.protocol import producer_send
from tubemq_aio.protocol.message import EncodedMessage, plain_message
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_master_values import BrokerAuthorization
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.producer_send import SendRequestEncoder, SendResult, SendResultParser
from tubemq_aio.protocol.rpc import encode_request

#: Built from this source (a build from an older one lacks these twins and runs the pure code).
CURRENT = EXT is not None and hasattr(EXT, "PlainSendEncoder") and hasattr(EXT, "plain_send_args")
CLIENT_ID = "10.0.0.1-1234-1700000000000-1-Python-0.1.0"
SENT_ADDR = 0x0A000001


def plain_encoders() -> list[Any]:
    """Factories of ``plain_parts`` for one pure encoder: the pure method and the compiled one."""
    params = [pytest.param(lambda enc: enc.plain_parts, id="pure")]
    if CURRENT:
        assert EXT is not None
        compiled = EXT.PlainSendEncoder
        params.append(
            pytest.param(lambda enc: compiled(enc, plain_message).plain_parts, id="compiled")
        )
    return params


def plain_checks() -> list[Any]:
    return pure_and_compiled(config.plain_send_args, "plain_send_args")


def test_compiled_twins_are_used_when_present() -> None:
    if os.environ.get(accelerator.ENV_EXPECT, "") not in ("", "0"):
        assert CURRENT, "the built extension is older than its source: rebuild it"
    attempts = started_producer(1, HeldConnection())._attempts
    assert attempts is not None
    plain_parts: Any = attempts._plain_parts
    if not CURRENT or accelerator.compiled() is None:
        assert config.is_plain_send is config.plain_send_args
        assert isinstance(plain_parts.__self__, SendRequestEncoder)
        return
    assert EXT is not None
    assert config.is_plain_send is EXT.plain_send_args
    assert isinstance(plain_parts.__self__, EXT.PlainSendEncoder)
    parse: Any = attempts.parse_answer
    assert isinstance(parse.__self__, EXT.SendResultParser)


# ---- the plain request -------------------------------------------------------------------------


@pytest.mark.parametrize("make", plain_encoders())
@settings(max_examples=examples(200), deadline=None)
@given(
    topic=st.text(min_size=1, max_size=40),
    partition_id=st.integers(0, 2**31 - 1),
    bodies=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=4),
    timeouts=st.lists(st.sampled_from([1, 3000, 15000, 2**31 - 1]), min_size=1, max_size=3),
    tokens=st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.text(max_size=20)),
        min_size=1,
        max_size=3,
    ),
)
def test_plain_request_is_the_protobuf_librarys(
    make: Any,
    topic: str,
    partition_id: int,
    bodies: list[bytes],
    timeouts: list[int],
    tokens: list[tuple[int, str | None]],
) -> None:
    encoder = SendRequestEncoder(CLIENT_ID, SENT_ADDR)
    plain_parts = make(encoder)
    for visit, token in tokens:  # a new authInfo object each time: the tail follows it
        auth = BrokerAuthorization(visit, token)
        for body in bodies:
            for timeout_ms in timeouts:
                reference = encode_request(
                    3,
                    13,
                    timeout_ms,
                    build_send_request(
                        client_id=CLIENT_ID,
                        topic=topic,
                        partition_id=partition_id,
                        message=plain_message(body),
                        sent_addr=SENT_ADDR,
                        auth=auth,
                    ),
                )
                for _ in range(2):  # made, then kept
                    parts, size = plain_parts(topic, partition_id, body, auth, timeout_ms)
                    assert parts[1] is body  # the body is not copied before the frame is written
                    assert b"".join(parts) == reference
                    assert size == len(reference)
                    head, data, tail, whole = encoder.encode_parts(
                        topic, partition_id, plain_message(body), auth, timeout_ms
                    )
                    assert parts == (head, data, tail)
                    assert size == whole


@pytest.mark.parametrize("make", plain_encoders())
def test_plain_request_refuses_a_zero_timeout(make: Any) -> None:
    plain_parts = make(SendRequestEncoder(CLIENT_ID, SENT_ADDR))
    with pytest.raises(LocalProtocolError):
        plain_parts("t", 1, b"x", BrokerAuthorization(1), 0)


@pytest.mark.parametrize("make", plain_encoders())
def test_plain_request_of_other_bodies(make: Any) -> None:
    # begin() hands only bytes over; anything else still gets the pure encoder's bytes.
    encoder = SendRequestEncoder(CLIENT_ID, SENT_ADDR)
    plain_parts = make(encoder)
    auth = BrokerAuthorization(7, "tok")
    plain_parts("t", 1, b"abc", auth, 5000)  # a kept head for bytes bodies of 3
    for body in (bytearray(b"abc"), memoryview(b"abc")):
        parts, size = plain_parts("t", 1, body, auth, 5000)
        head, data, tail, whole = encoder.encode_parts(
            "t", 1, EncodedMessage(cast(bytes, body), 0, "", ""), auth, 5000
        )
        assert parts == (head, data, tail)
        assert size == whole


# ---- the plain check ---------------------------------------------------------------------------

_topics = st.one_of(
    st.text(max_size=8),
    st.text(alphabet=" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u2000\u3000x", max_size=6),
    st.sampled_from([None, b"t", 3, "", " ", "\u3000"]),
)
_bodies = st.one_of(st.binary(max_size=4), st.sampled_from([None, bytearray(b"x"), "x", 0]))
_extras: st.SearchStrategy[object] = st.sampled_from([None, None, {}, "", 0, "x"])


class _StrTopic(str):
    """A ``str`` subclass: not plain (the pure check asks for exactly ``str``)."""


@pytest.mark.parametrize("check", plain_checks())
@settings(max_examples=examples(500), deadline=None)
@given(topic=_topics, body=_bodies, attributes=_extras, msg_type=_extras, msg_time=_extras)
def test_plain_check_agrees_with_the_pure_one(
    check: Any, topic: object, body: object, attributes: object, msg_type: object, msg_time: object
) -> None:
    want = config.plain_send_args(topic, body, attributes, msg_type, msg_time)
    assert check(topic, body, attributes, msg_type, msg_time) is want


@pytest.mark.parametrize("check", plain_checks())
def test_plain_check_cases(check: Any) -> None:
    assert check("t", b"x", None, None, None) is True
    assert check(" t ", b"x", None, None, None) is True
    assert check(" \u3000\t", b"x", None, None, None) is False
    assert check("", b"x", None, None, None) is False
    assert check("t", b"", None, None, None) is False
    assert check("t", bytearray(b"x"), None, None, None) is False
    assert check(_StrTopic("t"), b"x", None, None, None) is False
    assert check("t", b"x", {}, None, None) is False
    assert check("t", b"x", None, "", None) is False
    assert check("t", b"x", None, None, "") is False


# ---- the answer parser's reads of the partition ------------------------------------------------


def result_parsers() -> list[Any]:
    """The pure parser, and the compiled one told the layouts of ``Partition`` and ``Broker``."""
    pure = SendResultParser().parse
    params = [pytest.param(pure, id="pure")]
    if CURRENT:
        assert EXT is not None
        compiled = EXT.SendResultParser(
            SendResult, producer_send._RESULT_FIELDS, pure, Partition, Broker
        ).parse
        params.append(pytest.param(compiled, id="compiled"))
    return params


@dataclass(frozen=True, slots=True)
class _OtherBroker(Broker):
    pass


@dataclass(frozen=True, slots=True)
class _OtherPartition(Partition):
    pass


@pytest.mark.parametrize("parse", result_parsers())
def test_parser_reads_any_partition_like_python(parse: Any) -> None:
    data = broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="", messageId=5, appendTime=1, appendOffset=28
    ).SerializeToString()
    want = SendResult("demo", "7:demo:3", 3, 7, 5, 1, 28)
    broker = Broker(7, "127.0.0.1", 8123)
    duck = SimpleNamespace(
        topic="demo", partition_key="7:demo:3", partition_id=3, broker=SimpleNamespace(broker_id=7)
    )
    for partition in (
        Partition(broker, "demo", 3),
        _OtherPartition(broker, "demo", 3),
        Partition(_OtherBroker(7, "127.0.0.1", 8123), "demo", 3),
        duck,
    ):
        assert parse(data, partition) == want
    unset = object.__new__(Partition)  # slots never set: read as Python reads them (an error)
    with pytest.raises(AttributeError):
        parse(data, unset)


def test_compiled_parser_takes_the_common_answer_itself() -> None:
    parse = producer_send.send_result_parser()
    if not CURRENT or accelerator.compiled() is None:
        assert isinstance(getattr(parse, "__self__", None), SendResultParser)
        return
    assert EXT is not None

    def unused(*args: object) -> Any:
        raise AssertionError("the common answer must not reach the pure code")

    fast = EXT.SendResultParser(
        SendResult, producer_send._RESULT_FIELDS, unused, Partition, Broker
    ).parse
    data = broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="", messageId=5, appendTime=1, appendOffset=28
    ).SerializeToString()
    assert fast(data, Partition(Broker(7, "h", 1), "demo", 3)) == SendResult(
        "demo", "7:demo:3", 3, 7, 5, 1, 28
    )
