"""Option parsing of the Spark source (no Spark, no cluster)."""

from __future__ import annotations

import pickle
import ssl

import pytest

from tubemq_aio.auth import Credentials
from tubemq_aio.errors import ConfigError, SourceOptionError
from tubemq_aio.spark._options import OffsetSpec, client_options, parse_source_options

BASE = {"master": "127.0.0.1:8715", "topic": "a,b"}


def test_defaults_for_stream_and_batch() -> None:
    stream = parse_source_options(BASE, streaming=True)
    batch = parse_source_options(BASE, streaming=False)
    assert stream.topics == ("a", "b")
    assert stream.starting == OffsetSpec("latest")
    assert batch.starting == OffsetSpec("earliest")
    assert batch.ending == OffsetSpec("latest")
    assert stream.fail_on_data_loss is True
    assert stream.max_offsets_per_trigger is None
    assert stream.planner_group == "spark-tubemq_planner"


def test_names_are_case_insensitive_and_values_parsed() -> None:
    opts = parse_source_options(
        {
            **BASE,
            "GROUP": "job-1",
            "maxOffsetsPerTrigger": "100",
            "msgTypes": "x, y",
            "FailOnDataLoss": "false",
            "startingOffsets": '{"2:b:0": 56, "1:a:1": 28}',
        },
        streaming=True,
    )
    assert opts.group == "job-1"
    assert opts.max_offsets_per_trigger == 100
    assert opts.msg_types == ("x", "y")
    assert opts.fail_on_data_loss is False
    assert opts.starting.as_dict() == {"1:a:1": 28, "2:b:0": 56}
    assert list(opts.starting.as_dict()) == ["1:a:1", "2:b:0"]


def test_options_survive_pickling() -> None:
    opts = parse_source_options({**BASE, "authUser": "u", "authPassword": "pw-1"}, streaming=True)
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert "pw-1" not in repr(opts)


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        ({"topic": "a"}, True, "master"),
        ({"master": "h:1"}, True, "topic"),
        ({**BASE, "bogus": "1"}, True, "bogus"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
        ({**BASE, "maxOffsetsPerTrigger": "5"}, False, "maxOffsetsPerTrigger"),
        ({**BASE, "endingOffsets": "latest"}, True, "endingOffsets"),
        ({**BASE, "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({**BASE, "startingOffsets": "{not json"}, True, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"1:c:0": 5}'}, True, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"1:a:0": -5}'}, True, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"bad": 5}'}, True, "startingOffsets"),
        ({**BASE, "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**BASE, "group": "9bad"}, True, "group"),
        ({**BASE, "rpcTimeout": "1"}, True, "rpcTimeout"),
        ({**BASE, "tlsCaFile": "/x"}, True, "tls"),
        ({**BASE, "authPassword": "p"}, True, "authUser"),
        ({**BASE, "master": "h:notaport"}, True, "master"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], streaming: bool, named: str) -> None:
    with pytest.raises(SourceOptionError, match=named) as info:
        parse_source_options(options, streaming=streaming)
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("option", "value", "others"),
    [
        ("topic", "a b", ("'group'", "'msgTypes'")),
        ("group", "9bad", ("'topic'", "'msgTypes'")),
        ("msgTypes", "x" * 300, ("'topic'", "'group'")),
    ],
)
def test_a_bad_name_names_only_its_own_option(
    option: str, value: str, others: tuple[str, ...]
) -> None:
    # "option 'topic', 'msgTypes' or 'group' is invalid" left the user to guess which.
    with pytest.raises(SourceOptionError, match=f"option '{option}'[ :]") as info:
        parse_source_options({**BASE, option: value}, streaming=True)
    assert not any(other in str(info.value) for other in others)


def test_a_group_whose_planner_group_is_too_long_is_refused_when_planned() -> None:
    # 920 to 1 024 characters passed, and the driver's planner consumer ('<group>_planner',
    # 8 more) failed as the query started, with an error that named no option.
    with pytest.raises(SourceOptionError, match="option 'group' is invalid"):
        parse_source_options({**BASE, "group": "g" * 920}, streaming=True)
    assert parse_source_options({**BASE, "group": "g" * 919}, streaming=True)


@pytest.mark.parametrize("name", ["startingOffsets", "endingOffsets"])
def test_an_offset_beyond_int64_is_refused_when_planned(name: str) -> None:
    # It was taken, and failed later in a task, encoding the broker request.
    with pytest.raises(SourceOptionError, match=f"{name}.*9223372036854775807"):
        parse_source_options({**BASE, name: '{"1:a:0": 9223372036854775808}'}, streaming=False)
    assert parse_source_options({**BASE, name: '{"1:a:0": 9223372036854775807}'}, streaming=False)


def test_client_options_are_client_config_kwargs() -> None:
    kwargs = client_options(
        {
            "master": "h1:8715,h2",
            "rpcTimeout": "5",
            "authUser": "u",
            "authPassword": "p",
            "tls": "true",
            "topic": "ignored",
        }
    )
    assert kwargs["masters"] == "h1:8715,h2:8715"
    assert kwargs["rpc_timeout"] == 5.0
    assert kwargs["credentials"] == Credentials("u", "p")
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert client_options({"master": "h"}) == {"masters": "h:8715"}


def test_starting_times_parse_epoch_ms_and_rfc3339() -> None:
    from datetime import UTC, datetime

    from tubemq_aio.spark._options import StartTimes

    every = parse_source_options({**BASE, "startingTimestamp": "1795946400000"}, streaming=True)
    assert every.starting_times == StartTimes(datetime(2026, 11, 29, 10, tzinfo=UTC))
    assert every.starting_times.for_keys(["1:a:0"]) == {
        "1:a:0": datetime(2026, 11, 29, 10, tzinfo=UTC)
    }
    text = parse_source_options(
        {**BASE, "startingtimestamp": "2026-11-29T18:00:00+08:00"}, streaming=False
    )
    assert text.starting_times is not None
    assert text.starting_times.every == datetime(2026, 11, 29, 10, tzinfo=UTC)
    by = parse_source_options(
        {
            **BASE,
            "startingOffsetsByTimestamp": '{"2:b:0": 1795946400000, '
            '"1:a:1": "2026-11-29T10:00:00Z"}',
        },
        streaming=True,
    )
    assert by.starting_times is not None
    assert by.starting_times.for_keys(["9:a:9"]) == dict(by.starting_times.by_partition)
    assert [k for k, _ in by.starting_times.by_partition] == ["1:a:1", "2:b:0"]
    assert pickle.loads(pickle.dumps(by)) == by


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"startingTimestamp": "2026-11-29T10:00:00"}, "no zone"),
        ({"startingTimestamp": "soon"}, "startingTimestamp"),
        ({"startingTimestamp": "99999999999999999999"}, "out of range"),
        ({"startingTimestamp": "1", "startingOffsets": "earliest"}, "exclude each other"),
        ({"startingOffsetsByTimestamp": "[]"}, "JSON object"),
        ({"startingOffsetsByTimestamp": "{}"}, "JSON object"),
        ({"startingOffsetsByTimestamp": '{"x": 1}'}, "bad partition key"),
        ({"startingOffsetsByTimestamp": '{"1:c:0": 1}'}, "not in option 'topic'"),
        ({"startingOffsetsByTimestamp": '{"1:a:0": true}'}, "epoch milliseconds"),
    ],
)
def test_bad_starting_times_name_the_problem(options: dict[str, str], named: str) -> None:
    with pytest.raises(SourceOptionError, match=named):
        parse_source_options({**BASE, **options}, streaming=True)


def test_msg_time_zone_is_an_iana_name() -> None:
    assert parse_source_options(BASE, streaming=True).msg_time_zone == "UTC"
    zoned = parse_source_options({**BASE, "msgTimeZone": "Asia/Shanghai"}, streaming=True)
    assert zoned.msg_time_zone == "Asia/Shanghai"
    for bad in ("Mars/Olympus", "+08:00", "", "../etc/passwd"):
        with pytest.raises(SourceOptionError, match="msgTimeZone"):
            parse_source_options({**BASE, "msgTimeZone": bad}, streaming=True)
