"""One validation dialect: the Checks methods for text values, choices and class tuples, and the
checkers moved onto Checks (protocol names and messages, client-balanced nodes, credentials,
Spark options, CLI JSON lines) report every problem of one call together with a typed error."""

from __future__ import annotations

import argparse
import math
from datetime import datetime
from typing import Any

import pytest

from tubemq_aio import BoundConsume, ClientConfig, ProducerConfig
from tubemq_aio.auth import Credentials
from tubemq_aio.checks import Checks, kinds
from tubemq_aio.cli._common import parse_attrs
from tubemq_aio.cli._connect import connection_options
from tubemq_aio.cli._input import Outgoing, parse_json_line
from tubemq_aio.cli._listing import web_endpoint
from tubemq_aio.config import HostPort, parse_masters
from tubemq_aio.errors import (
    BoundConsumeError,
    ClientBalanceConfigError,
    ConfigError,
    ConsumerConfigError,
    InvalidMessageError,
    SinkOptionError,
    SourceOptionError,
)
from tubemq_aio.producer.config import check_send_many_args
from tubemq_aio.protocol.attributes import format_msg_time
from tubemq_aio.protocol.broker_blocking import BrokerBlockingConfig
from tubemq_aio.protocol.client_balance import validate_bootstrap_offset, validate_node
from tubemq_aio.protocol.client_id import make_client_id
from tubemq_aio.protocol.consumer_meta import BoundSession, validate_bound_offsets
from tubemq_aio.protocol.consumer_names import (
    check_topic_name,
    validate_filters,
    validate_group_name,
    validate_subscriptions,
)
from tubemq_aio.protocol.message import (
    check_message,
    encode_message,
    ip_to_int,
    validate_topic,
)
from tubemq_aio.spark._options import parse_source_options


def wrong(value: object) -> Any:
    """``value`` typed as anything: the tests pass what the type hints forbid."""
    return value


def problems_of(checks: Checks) -> str:
    with pytest.raises(ConfigError) as info:
        checks.done()
    return str(info.value)


def test_values_written_as_text() -> None:
    checks = Checks("opts")
    assert checks.number_text("a", " 2.5 ", low=0, high=3) == 2.5
    assert checks.integer_text("b", " 12 ", low=1) == 12
    assert checks.flag_text("c", "YES") is True
    assert checks.flag_text("d", "0") is False
    assert checks.ok
    checks.number_text("e", "fast", low=0, high=1)
    checks.number_text("f", "nan", low=0, high=1)
    checks.number_text("g", "0", low=0, high=1, low_open=True)
    checks.integer_text("h", "1.5", low=0)
    checks.integer_text("i", "0", low=1)
    checks.flag_text("j", "maybe")
    text = problems_of(checks)
    for name in "efghij":
        assert f"{name} must" in text


def test_choice_text_length_and_class_tuples() -> None:
    checks = Checks("call")
    checks.choice("mode", "fast", ("fast", "slow"))
    assert checks.text("name", "  abc ", max_length=3) == "abc"
    assert checks.instance("body", bytearray(b"x"), (bytes, bytearray))
    assert checks.ok
    checks.choice("mode", "medium", ("fast", "slow"))
    checks.choice("level", True, (1, 2))  # True is not 1
    checks.text("name", "abcd", max_length=3)
    checks.text("secret", "abcd", max_length=3, secret=True)
    assert not checks.instance("body", "x", (bytes, bytearray, memoryview))
    text = problems_of(checks)
    assert "mode must be one of 'fast', 'slow', got 'medium'" in text
    assert "level must be one of 1, 2, got True" in text
    assert "name must be at most 3 characters: 'abcd'" in text
    assert "secret must be at most 3 characters;" in text  # the value is not shown
    assert "body must be a bytes, bytearray or memoryview, got str" in text
    assert kinds(int) == "int"


def test_consumer_names_report_every_problem_together() -> None:
    with pytest.raises(ConsumerConfigError) as info:
        validate_subscriptions({"a b": ["x,y"], "": None, "ok": ["", "z"]})
    text = str(info.value)
    assert "'a b' contains a separator" in text
    assert "'x,y' contains a separator" in text
    assert "topic name must not be blank" in text
    assert "blank name" in text
    with pytest.raises(ConsumerConfigError, match="must be a string, got int"):
        validate_group_name(wrong(5))
    with pytest.raises(ConsumerConfigError, match="only strings"):
        validate_filters([wrong(1)])
    with pytest.raises(ConsumerConfigError) as bound:
        validate_bound_offsets({"1:a:0": -1, "bad": 1, "1:b:0": True}, ["a"])
    assert "offset of 1:a:0 must be an integer >= 0" in str(bound.value)
    assert "bad" in str(bound.value)
    assert "not subscribed" in str(bound.value)
    assert "got bool" in str(bound.value)
    with pytest.raises(ConsumerConfigError, match="session_key must not be blank; source_count"):
        BoundSession(" ", 0)


def test_client_balanced_numbers() -> None:
    assert validate_node(0, 7) == (-2, -2)
    assert validate_node(3, 2) == (3, 2)
    with pytest.raises(ClientBalanceConfigError, match=r"node_id must be an integer in \[0, 2\]"):
        validate_node(3, 3)
    with pytest.raises(ClientBalanceConfigError, match=r"source_count .* got bool"):
        validate_node(wrong(True), 0)
    with pytest.raises(ClientBalanceConfigError, match="source_count"):
        validate_node(2**31, 0)
    assert validate_bootstrap_offset(None) is None
    with pytest.raises(ClientBalanceConfigError, match=r"offset must be an integer in \[0, "):
        validate_bootstrap_offset(-1)
    with pytest.raises(ClientBalanceConfigError, match="got float"):
        validate_bootstrap_offset(wrong(1.0))


def test_message_checks_collect_and_keep_the_fast_path() -> None:
    body = b"plain"
    assert encode_message(body).data is body  # no copy on the plain path
    assert validate_topic("t") == "t"
    with pytest.raises(InvalidMessageError) as info:
        check_message(wrong(5), attributes=[("k", "v")], msg_type=wrong(3))
    text = str(info.value)
    assert "message body must be a bytes, bytearray or memoryview, got int" in text
    assert "attributes must be a Mapping, got list" in text
    assert "msg_type must be a str, got int" in text
    with pytest.raises(InvalidMessageError, match="at most 64 characters"):
        validate_topic("t" * 65)
    with pytest.raises(InvalidMessageError, match="must not be blank"):
        validate_topic("  ")
    with pytest.raises(InvalidMessageError, match="attribute key must not be blank"):
        encode_message(b"x", attributes={" ": "v"})
    with pytest.raises(InvalidMessageError, match="yyyyMMddHHmm"):
        format_msg_time("2026")
    assert format_msg_time(datetime(2026, 1, 2, 3, 4)) == "202601020304"
    with pytest.raises(InvalidMessageError, match="not an IPv4 address"):
        ip_to_int("1.2.3")


def test_credentials_check_timestamp_and_nonce() -> None:
    creds = Credentials("u", "s3cret")
    assert creds.authenticate(1, 0).nonce == 0
    with pytest.raises(ConfigError) as info:
        creds.authenticate(-1, wrong(True))
    assert "timestamp_ms must be an integer >= 0" in str(info.value)
    assert "nonce must be an integer in [0, 2147483646], got bool" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_spark_source_names_every_bad_option() -> None:
    options = {
        "master": "h:1",
        "topic": "a",
        "rpcTimeout": "1",
        "failOnDataLoss": "maybe",
        "minPartitions": "0",
        "startingOffsets": '{"1:b:0": -5}',
    }
    with pytest.raises(SourceOptionError) as info:
        parse_source_options(options, streaming=True)
    text = str(info.value)
    for name in ("rpcTimeout", "failOnDataLoss", "minPartitions", "topic of '1:b:0'", "-5"):
        assert name in text
    assert not issubclass(SinkOptionError, SourceOptionError)


def test_cli_json_line_names_every_bad_field() -> None:
    defaults = Outgoing(b"", {}, None, None, None)
    line = b'{"body": 5, "body_encoding": "hex", "msg_type": 1, "msg_time": "soon"}'
    with pytest.raises(ConfigError) as info:
        parse_json_line(line, defaults)
    text = str(info.value)
    assert text.startswith("JSON line: ")
    for part in ('"body_encoding" must be one of', '"body" must be a str', '"msg_type"', "soon"):
        assert part in text
    with pytest.raises(ConfigError, match="not JSON"):
        parse_json_line(b"{", defaults)
    with pytest.raises(ConfigError, match="expected a JSON object"):
        parse_json_line(b"[1]", defaults)
    parsed = parse_json_line(b'{"body": "aGk=", "body_encoding": "base64"}', defaults)
    assert parsed is not None
    assert parsed.body == b"hi"


def test_fail_raises_with_everything_recorded_so_far() -> None:
    checks = Checks("parse", error=ConsumerConfigError)
    checks.problem("first")
    with pytest.raises(ConsumerConfigError, match="parse: first; second"):
        checks.fail("second")


def test_every_bad_master_address_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        parse_masters("h1:0,h2:x,[::1,good:8715")
    text = str(info.value)
    assert "port must be an integer in [1, 65535], got 0" in text
    assert "'h2:x' has an invalid port" in text
    assert "'[::1' is not a valid [IPv6]:port" in text
    assert parse_masters(" h1 , h1:8715") == (HostPort("h1", 8715),)
    with pytest.raises(ConfigError, match="at least one master"):
        parse_masters(" , ")


def test_url_problems_are_reported_together_without_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        ClientConfig.from_url("tubemq://u:s3cret@h:1/path?nope=1&tls=perhaps&rpc_timeout=x")
    text = str(info.value)
    for part in (
        "path or a fragment",
        "unknown option 'nope'",
        "'tls' needs true or false",
        "'rpc_timeout' has an invalid value",
    ):
        assert part in text
    assert "s3cret" not in text


def test_broker_blocking_config_checks_every_field() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerBlockingConfig(
            evaluation_interval=math.nan,
            threshold_ratio=1.5,
            link_max_blocked=-1,
            enabled=wrong("yes"),
            min_expected_successes=wrong(True),
        )
    text = str(info.value)
    for name in (
        "evaluation_interval",
        "threshold_ratio",
        "link_max_blocked",
        "enabled",
        "min_expected_successes",
    ):
        assert name in text
    assert isinstance(info.value, ValueError)


def test_client_id_and_send_many_checks() -> None:
    with pytest.raises(ConfigError, match="local_ip must not be blank; version must not be"):
        make_client_id(" ", 1, 2, 3, " ")
    with pytest.raises(ConfigError, match="version must be at most 32 characters"):
        make_client_id("1.2.3.4", 1, 2, 3, "v" * 2000)
    with pytest.raises(ConfigError, match="longer than"):
        make_client_id("1.2.3.4", 1, 2, 3, "v", group="g" * 1100, kind="Pull")
    with pytest.raises(InvalidMessageError, match=r"send_many: bodies\[1\]: message body"):
        check_send_many_args("t", [b"a", b"", 5], 10)
    with pytest.raises(InvalidMessageError, match="send_many: 3 bodies exceed max_send_many=2"):
        check_send_many_args("t", [b"a"] * 3, 2)
    with pytest.raises(InvalidMessageError, match="bodies must be a list or tuple"):
        check_send_many_args("t", wrong(b"abc"), 2)


def test_cli_arguments_report_every_problem() -> None:
    args = argparse.Namespace(
        tls_key="k.pem", tls_cert=None, tls_ca=None, user=None, password="pw", framing=None
    )
    with pytest.raises(ConfigError) as info:
        connection_options(args)
    assert str(info.value) == "arguments: --tls-key needs --tls-cert; --password needs --user"
    with pytest.raises(ConfigError) as attrs:
        parse_attrs(["a=1", "b", "=c"])
    assert "'b'" in str(attrs.value)
    assert "'=c'" in str(attrs.value)
    assert web_endpoint("h:9", None) == ("h", 9)
    with pytest.raises(ConfigError, match="--web 'ftp://h:1'"):
        web_endpoint("ftp://h:1", None)


def test_bound_consume_names_every_problem() -> None:
    with pytest.raises(BoundConsumeError) as info:
        BoundConsume(" ", 0, select_big=wrong("yes"), offsets={"bad": 1, "1:t:0": -1})
    text = str(info.value)
    for part in (
        "session_key must not be blank",
        "source_count",
        "select_big",
        "malformed partition key 'bad'",
        "offset of 1:t:0",
    ):
        assert part in text
    assert BoundConsume(" s ", 2, offsets={"1:t:0": 5}).session_key == "s"


@pytest.mark.parametrize("bad", ["Mars/Olympus", "+08:00", "", "../etc/passwd", None, 8, b"UTC"])
def test_a_time_zone_is_an_iana_name_wherever_it_is_given(bad: object) -> None:
    """``iana_zone`` is the one lookup behind the CLI's, Spark's and the gateway's zones."""
    from tubemq_aio.checks import iana_zone
    from tubemq_aio.gateway.config.tables import GroupSpec

    assert iana_zone("Asia/Shanghai") is not None
    assert iana_zone(bad) is None
    with pytest.raises(ConfigError, match="msg_time_zone must be an IANA time zone"):
        GroupSpec(name="g1", topics=("t",), msg_time_zone=bad)  # type: ignore[arg-type]


def test_one_topic_check_serves_every_caller_in_the_callers_error_class() -> None:
    checks = Checks("publish")
    assert check_topic_name(checks, " t1 ") == "t1"
    assert check_topic_name(checks, "a b") == "a b"
    assert check_topic_name(checks, 5) is None
    with pytest.raises(ConfigError) as info:
        checks.done()
    text = str(info.value)
    assert "topic name: 'a b' contains a separator" in text
    assert "topic name must be a string, got int" in text
    # before: a producer's bad topic raised the consumers' error class
    assert not isinstance(info.value, ConsumerConfigError)
    with pytest.raises(ConfigError) as produced:
        ProducerConfig(masters="h:1", topics=("ok", "a:b"))  # type: ignore[arg-type]
    assert not isinstance(produced.value, ConsumerConfigError)
    assert "'a:b' contains a separator" in str(produced.value)
    # before: the Spark source named only the first of two bad topics
    with pytest.raises(SourceOptionError) as source:
        parse_source_options({"master": "h:1", "topic": "a b,c\x01d"}, streaming=True)
    assert "option 'topic': 'a b' contains a separator" in str(source.value)
    assert "option 'topic': 'c\\x01d' contains a control character" in str(source.value)
