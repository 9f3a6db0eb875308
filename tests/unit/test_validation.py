"""Every public constructor and call refuses bad input with ConfigError before any I/O.

Regression tests for the hardening issue's defects 7 (a string taken for a collection) and 8
(wrong types, NaN/inf/huge numbers, IPv6 literals), plus the extra holes found by attacking the
public API the same way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tubemq_aio import (
    BoundConsume,
    ClientBalancedConsumer,
    ClientConfig,
    ConfigError,
    Consumer,
    ConsumerConfig,
    ConsumerConfigError,
    Credentials,
    Producer,
    ProducerConfig,
    TubeMQError,
    UnknownPartitionError,
    tdmsg,
)
from tubemq_aio.checks import MAX_SECONDS, Checks
from tubemq_aio.config import HostPort, parse_host_port, parse_masters
from tubemq_aio.consumer.config import normalize_topics
from tubemq_aio.producer.config import MAX_SEND_TIMEOUT, check_send_args, plain_send_args
from tubemq_aio.protocol.message import encode_message

_ClientConfig: Any = ClientConfig  # the tests pass what the type hints forbid
_ProducerConfig: Any = ProducerConfig  # the tests pass what the type hints forbid
_ConsumerConfig: Any = ConsumerConfig  # the tests pass what the type hints forbid

M = "127.0.0.1:8715"


def raises_config_error(build: Callable[[], object]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build()
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, TubeMQError)
    return info.value


# ---- defect 8: the issue's list, one by one ------------------------------------------------

BAD_CONSTRUCTIONS: dict[str, Callable[[], object]] = {
    "Producer()": lambda: Producer(),
    "Producer(123)": lambda: Producer(123),  # type: ignore[arg-type]
    "rpc_timeout='5'": lambda: _ClientConfig(masters=M, rpc_timeout="5"),
    "rpc_timeout=nan": lambda: _ClientConfig(masters=M, rpc_timeout=math.nan),
    "connect_timeout=True": lambda: _ClientConfig(masters=M, connect_timeout=True),
    "Consumer(topics=5)": lambda: Consumer(M, group="gg", topics=5),  # type: ignore[arg-type]
    "Consumer(topics=[''])": lambda: Consumer(M, group="gg", topics=[""]),
    "Producer(topics=[''])": lambda: Producer(M, topics=[""]),
    "Producer(topics=[5])": lambda: Producer(M, topics=[5]),  # type: ignore[list-item]
    "Producer(topics=b'x')": lambda: Producer(M, topics=b"x"),  # type: ignore[arg-type]
    "from_url(123)": lambda: ClientConfig.from_url(123),  # type: ignore[arg-type]
    "masters=[]": lambda: _ClientConfig(masters=[]),
    "masters=()": lambda: _ClientConfig(masters=()),
    "masters=5": lambda: _ClientConfig(masters=5),
    "masters=[5]": lambda: _ClientConfig(masters=[5]),
    "max_in_flight=1.5": lambda: _ClientConfig(masters=M, max_in_flight=1.5),
    "max_in_flight=True": lambda: _ClientConfig(masters=M, max_in_flight=True),
    "idle_timeout=inf": lambda: _ClientConfig(masters=M, idle_timeout=math.inf),
    "idle_timeout=1e300": lambda: _ClientConfig(masters=M, idle_timeout=1e300),
    "heartbeat_interval=nan": lambda: _ClientConfig(masters=M, heartbeat_interval=math.nan),
    "connection_reuse='no'": lambda: _ClientConfig(masters=M, connection_reuse="no"),
    "credentials=tuple": lambda: _ClientConfig(masters=M, credentials=("a", "b")),
    "ssl_context=True": lambda: _ClientConfig(masters=M, ssl_context=True),
    "client_host=5": lambda: _ClientConfig(masters=M, client_host=5),
    "tls_server_hostname=5": lambda: _ClientConfig(masters=M, tls_server_hostname=5),
    "Credentials(1, 2)": lambda: Credentials(1, 2),  # type: ignore[arg-type]
    "Credentials('u', None)": lambda: Credentials("u", None),  # type: ignore[arg-type]
    "send_timeout=nan": lambda: _ProducerConfig(masters=M, send_timeout=math.nan),
    "send_timeout=1e300": lambda: _ProducerConfig(masters=M, send_timeout=1e300),
    "send_retries=True": lambda: _ProducerConfig(masters=M, send_retries=True),
    "close_grace=nan": lambda: _ProducerConfig(masters=M, close_grace=math.nan),
    "publish_timeout=inf": lambda: _ProducerConfig(masters=M, publish_timeout=math.inf),
    "partitioner=5": lambda: _ProducerConfig(masters=M, partitioner=5),
    "max_in_flight_sends=1e9": lambda: _ProducerConfig(masters=M, max_in_flight_sends=10**9),
    "fetchers=2.5": lambda: _ConsumerConfig(masters=M, group="gg", topics=["t"], fetchers=2.5),
    "confirm_timeout=nan": lambda: _ConsumerConfig(
        masters=M, group="gg", topics=["t"], confirm_timeout=math.nan
    ),
    "auto_ack='no'": lambda: _ConsumerConfig(masters=M, group="gg", topics=["t"], auto_ack="no"),
    "group=5": lambda: _ConsumerConfig(masters=M, group=5, topics=["t"]),
    "consume_from=[]": lambda: _ConsumerConfig(
        masters=M, group="gg", topics=["t"], consume_from=[]
    ),
    "bound='x'": lambda: _ConsumerConfig(masters=M, group="gg", topics=["t"], bound="x"),
    "filters={'t': 5}": lambda: Consumer(M, group="gg", topics={"t": 5}),
    "filters={'t': ['']}": lambda: Consumer(M, group="gg", topics={"t": [""]}),
    "topics={5: None}": lambda: Consumer(M, group="gg", topics={5: None}),  # type: ignore[dict-item]
    "Consumer() no masters": lambda: Consumer(group="gg", topics=["t"]),
    "Consumer(config=5)": lambda: Consumer(config=5),  # type: ignore[arg-type]
    "Producer(config=5)": lambda: Producer(config=5),  # type: ignore[arg-type]
    "Producer(unknown option)": lambda: Producer(M, no_such_option=1),  # type: ignore[call-arg]
    "Consumer(unknown option)": lambda: Consumer(M, group="gg", topics=["t"], no_such=1),  # type: ignore[call-arg]
    "cb node_id=1.5": lambda: ClientBalancedConsumer(
        M,
        group="gg",
        topics=["t"],
        source_count=2,
        node_id=1.5,  # type: ignore[arg-type]
    ),
    "cb source_count='2'": lambda: ClientBalancedConsumer(
        M,
        group="gg",
        topics=["t"],
        source_count="2",  # type: ignore[arg-type]
    ),
    "cb reassign_interval=nan": lambda: ClientBalancedConsumer(
        M, group="gg", topics=["t"], reassign_interval=math.nan
    ),
    "cb source_count=2**40": lambda: ClientBalancedConsumer(
        M, group="gg", topics=["t"], source_count=2**40
    ),
    "cb assignor=5": lambda: ClientBalancedConsumer(M, group="gg", topics=["t"], assignor=5),  # type: ignore[arg-type]
    "BoundConsume offsets='abc'": lambda: BoundConsume("s", 1, offsets="abc"),  # type: ignore[arg-type]
    "BoundConsume offset 2**80": lambda: BoundConsume("s", 1, offsets={"1:t:0": 2**80}),
    "BoundConsume source_count 2**40": lambda: BoundConsume("s", 2**40),
    "Producer.from_url(unknown)": lambda: Producer.from_url("tubemq://h", no_such=1),  # type: ignore[call-arg]
}


@pytest.mark.parametrize("case", sorted(BAD_CONSTRUCTIONS))
def test_bad_construction_is_a_config_error(case: str) -> None:
    raises_config_error(BAD_CONSTRUCTIONS[case])


def test_all_problems_are_reported_at_once() -> None:
    error = raises_config_error(
        lambda: _ProducerConfig(
            masters=M,
            rpc_timeout="5",
            max_in_flight=1.5,
            send_retries=-1,
        )
    )
    text = str(error)
    assert "rpc_timeout" in text
    assert "max_in_flight" in text
    assert "send_retries" in text


def test_unknown_option_does_not_echo_its_value() -> None:
    error = raises_config_error(lambda: Producer(M, pasword="s3cret-value"))  # type: ignore[call-arg]
    assert "pasword" in str(error)
    assert "s3cret-value" not in str(error)


@pytest.mark.parametrize(
    "timeout", [0, -1, math.nan, math.inf, -math.inf, "5", 1e300, True, MAX_SEND_TIMEOUT + 1]
)
def test_send_timeout_is_checked_before_anything(timeout: object) -> None:
    raises_config_error(lambda: check_send_args("t", b"x", timeout=timeout))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topic", "key"),
    [
        ("", None),
        ("  ", None),
        (5, None),
        (None, None),
        ("t", 123),
        ("t", 1.5),
        ("t", "\udc00"),  # a lone surrogate is no UTF-8: the key hash could not encode it
        ("t", "k\ud800ey"),
    ],
)
def test_send_topic_and_key_types(topic: object, key: object) -> None:
    raises_config_error(lambda: check_send_args(topic, b"x", key=key))  # type: ignore[arg-type]


def test_good_send_arguments_pass() -> None:
    check_send_args("t", b"x")
    check_send_args("t", bytearray(b"x"), key=b"k", timeout=0.5)
    check_send_args("t", memoryview(b"x"), key="k", timeout=MAX_SEND_TIMEOUT)
    check_send_args(
        "t", b"x", timeout=3, attributes={"a": "b"}, msg_type="m", msg_time="202401011200"
    )
    check_send_args("t", b"x", attributes={}, msg_type="")


@pytest.mark.parametrize(
    ("args", "plain"),
    [
        (("t", b"x", None, None, None), True),
        (("", b"x", None, None, None), False),
        ((" \t", b"x", None, None, None), False),
        ((b"t", b"x", None, None, None), False),
        (("t", b"", None, None, None), False),
        (("t", bytearray(b"x"), None, None, None), False),  # bytes-like: the full check
        (("t", b"x", {}, None, None), False),  # even empty options: the full check
        (("t", b"x", None, "", None), False),
        (("t", b"x", None, None, "202401011200"), False),
    ],
)
def test_only_a_plain_send_skips_the_full_check(args: tuple[object, ...], plain: bool) -> None:
    """The one place that decides; its answer is a bool, and True only where the full check
    would pass without a problem."""
    assert plain_send_args(*args) is plain
    if plain:
        check_send_args(args[0], args[1])


async def test_send_checks_arguments_before_the_started_check() -> None:
    producer = Producer(M)  # never started: a bad argument must still say what is wrong
    bad_kwargs: list[dict[str, Any]] = [
        {"timeout": math.nan},
        {"key": 123},
        {"key": "\udc00"},
        {"timeout": "5"},
        {"attributes": [("a", "b")]},
        {"msg_type": 5},
        {"msg_time": "soon"},
    ]
    for kwargs in bad_kwargs:
        with pytest.raises(ConfigError):
            await producer.send("t", b"x", **kwargs)
    for body in (None, "text", b"", 5):
        with pytest.raises(ConfigError):
            await producer.send("t", body)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        producer.send_nowait("t", b"x", timeout=-1)
    # a callback that cannot be called was found only once the send was done: a TypeError in
    # the loop's exception handler, after the message was stored
    with pytest.raises(ConfigError, match="callback must be callable, got int"):
        producer.send_nowait("t", b"x", callback=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        await producer.publish(5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        await producer.publish([""])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attributes": [("a", "b")]},
        {"attributes": "a=b"},
        {"msg_type": 5},
        {"msg_time": 5},
        {"msg_time": "not a time"},
    ],
)
def test_message_fields_are_type_checked(kwargs: dict[str, Any]) -> None:
    raises_config_error(lambda: encode_message(b"x", **kwargs))


# ---- defect 7: a string is one item, never its characters -----------------------------------


def test_filter_string_is_one_filter_item() -> None:
    assert dict(normalize_topics({"t": "type1"})) == {"t": frozenset({"type1"})}
    config = _ConsumerConfig(masters=M, group="gg", topics={"t": "type1", "u": ["a", "b"]})
    assert config.filters_of("t") == frozenset({"type1"})
    assert config.filters_of("u") == frozenset({"a", "b"})


def test_topic_strings() -> None:
    assert list(normalize_topics("a,b")) == ["a", "b"]
    assert list(normalize_topics("demo")) == ["demo"]
    assert _ProducerConfig(masters=M, topics="demo").topics == ("demo",)
    assert _ProducerConfig(masters=M, topics="a, b").topics == ("a", "b")
    assert _ProducerConfig(masters=M, topics=["a", "a"]).topics == ("a",)


def test_pause_and_resume_take_one_name_as_one_name() -> None:
    consumer = Consumer(M, group="gg", topics=["demo"])
    consumer.pause("demo")
    assert set(consumer._paused) == {"demo"}
    consumer.resume("demo")
    assert set(consumer._paused) == set()
    consumer.pause(["demo", "1:demo:0"])
    assert set(consumer._paused) == {"demo", "1:demo:0"}
    for bad in (5, [""], "", b"demo", [5]):
        with pytest.raises(ConfigError):
            consumer.pause(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            consumer.resume(bad)  # type: ignore[arg-type]
    assert set(consumer._paused) == {"demo", "1:demo:0"}  # a refused call changed nothing
    # A name that matches nothing this consumer subscribes to would pause nothing, silently.
    for unknown in ("nosuch", "1:other:0", ["demo", "demo:0"], "1:demo"):
        with pytest.raises(ConfigError, match="neither a subscribed topic"):
            consumer.pause(unknown)
        with pytest.raises(ConfigError, match="neither a subscribed topic"):
            consumer.resume(unknown)
    assert set(consumer._paused) == {"demo", "1:demo:0"}


async def test_consumer_calls_check_their_arguments() -> None:
    consumer = Consumer(M, group="gg", topics=["demo"])
    for kwargs in (
        {"max_records": 0},
        {"max_records": 1.5},
        {"timeout": math.nan},
        {"timeout": -1},
        {"timeout": "1"},
        {"max_records": True},
    ):
        with pytest.raises(ConfigError):
            await consumer.getmany(**kwargs)

    async def handler(_: object) -> None:
        return None

    for concurrency in (0, 1.5, True, 10**9):
        with pytest.raises(ConfigError):
            await consumer.run(handler, concurrency=concurrency)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        await consumer.run(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [math.nan, -1, 0, "5", True, 10**6])
async def test_offsets_for_times_checks_its_timeout_before_any_request(timeout: object) -> None:
    """The timeout was checked by the planner consumer, after it had registered at the master:
    against this unreachable one a ConnectError after 4 s instead of the ConfigError."""
    consumer = Consumer("127.0.0.1:1", group="gg", topics=["demo"])
    when = {"1:demo:0": datetime.now(UTC)}
    with pytest.raises(ConsumerConfigError, match="offsets_for_times: timeout must be"):
        await consumer.offsets_for_times(when, timeout=timeout)  # type: ignore[arg-type]


async def test_offsets_for_times_checks_the_key_format_before_any_request() -> None:
    consumer = Consumer("127.0.0.1:1", group="gg", topics=["demo"])
    with pytest.raises(UnknownPartitionError, match="'x'"):
        await consumer.offsets_for_times({"x": datetime.now(UTC)})


async def test_client_balanced_calls_check_their_arguments() -> None:
    consumer = ClientBalancedConsumer(M, group="gg", topics=["t"])
    for offset in (-1, 1.5, "5", True, 2**80):
        with pytest.raises(ConfigError):
            await consumer.connect("1:t:0", offset)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            await consumer.read_at("1:t:0", offset)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        await consumer.disconnect(5)  # type: ignore[arg-type]


# ---- IPv6 and addresses -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[::1]:8715", HostPort("::1", 8715)),
        ("[::1]", HostPort("::1", 8715)),
        ("::1", HostPort("::1", 8715)),
        ("[fe80::1%lo]:9000", HostPort("fe80::1%lo", 9000)),
        ("host:1", HostPort("host", 1)),
        (" host ", HostPort("host", 8715)),
        ("10.0.0.1:65535", HostPort("10.0.0.1", 65535)),
    ],
)
def test_addresses_parse(text: str, expected: HostPort) -> None:
    assert parse_host_port(text, default_port=8715) == expected


@pytest.mark.parametrize(
    "text",
    [
        "[::1",
        "[::1]x",
        "[::1]:",
        "[nothost]:1",
        "h:0",
        "h:65536",
        "h:x",
        "h:",
        ":1",
        "1::2::3",
        "h:١٢",
        "a b:1",
        "user@h:1",
        "h:-1",
    ],
)
def test_bad_addresses_are_refused(text: str) -> None:
    raises_config_error(lambda: parse_host_port(text, default_port=8715))


def test_ipv6_masters_and_their_text() -> None:
    masters = _ClientConfig(masters="[::1]:8715,[::1]:8716,h:1").masters
    assert masters == (HostPort("::1", 8715), HostPort("::1", 8716), HostPort("h", 1))
    assert [str(m) for m in masters] == ["[::1]:8715", "[::1]:8716", "h:1"]
    assert ClientConfig.from_url("tubemq://[::1]:8715,[::1]:8716").masters == masters[:2]
    # A parsed config can be passed on as is.
    assert parse_masters(masters) == masters


# ---- the validation module itself ---------------------------------------------------------


def test_checks_number_edges() -> None:
    checks = Checks("x")
    assert checks.seconds("a", 1) == 1.0
    assert checks.seconds("b", MAX_SECONDS) == MAX_SECONDS
    assert checks.ok
    checks.seconds("c", 0)
    checks.seconds("d", MAX_SECONDS * 2)
    checks.integer("e", 2.0, low=0)
    checks.names("f", {"a": 1})
    checks.names("g", [], empty=False)
    with pytest.raises(ConfigError) as info:
        checks.done()
    for name in "cdefg":
        assert f"{name} must" in str(info.value)


@pytest.mark.parametrize("body", [None, "text", 5, 1.5, [1, 2]])
def test_tdmsg_entry_points_check_the_body_type(body: object) -> None:
    # bytes(5) is five zero bytes: a wrong type must not be decoded as a payload.
    for decode in (tdmsg.decode, tdmsg.decode_pb, tdmsg.detect_format, tdmsg.decode_packet):
        raises_config_error(lambda: decode(body))  # type: ignore[arg-type]  # noqa: B023
    raises_config_error(lambda: tdmsg.decode_message(body, None))  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [-1, 1.5, math.nan, True, "1"])
def test_tdmsg_decompression_budget_is_checked(size: object) -> None:
    raises_config_error(lambda: tdmsg.decode(b"x" * 8, max_decompressed_size=size))  # type: ignore[arg-type]


def test_tdmsg_attribute_types() -> None:
    raises_config_error(lambda: tdmsg.parse_attributes(5))  # type: ignore[arg-type]
    raises_config_error(lambda: tdmsg.decode_message(b"x", 5))  # type: ignore[arg-type]
    assert tdmsg.decode_message(b"x", "a=b")[0].data == b"x"


@pytest.mark.parametrize("cls", [ClientConfig, ProducerConfig, ConsumerConfig])
def test_every_config_field_is_validated(cls: type) -> None:
    """A field added without a check fails here: an arbitrary object is refused everywhere."""
    base: dict[str, Any] = {"masters": M}
    if cls is ConsumerConfig:
        base |= {"group": "gg", "topics": ["t"]}
    cls(**base)
    for field in dataclasses.fields(cls):
        with pytest.raises(ConfigError, match=field.name):
            cls(**(base | {field.name: object()}))
