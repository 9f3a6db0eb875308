"""The sink's driver-side checks and its Arrow-batch-to-send conversion (no Spark, no cluster)."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tubemq_aio.errors import (
    ConfigError,
    InvalidMessageError,
    SinkOptionError,
    SinkSchemaError,
    SourceOptionError,
    TubeMQError,
)
from tubemq_aio.spark._sink_plan import (
    DEFAULT_BATCH_ID_ATTRIBUTE,
    DEFAULT_MAX_IN_FLIGHT,
    OutRow,
    batch_rows,
    batch_topics,
    plan_sink,
)
from tubemq_aio.spark.sink import TubeMQWriteCommit, _summary

MASTER = {"master": "127.0.0.1:8715"}


def schema(*fields: tuple[str, object]) -> StructType:
    """A schema of nullable fields."""
    return StructType([StructField(name, dtype) for name, dtype in fields])  # type: ignore[arg-type]


BODY = ("body", BinaryType())
ATTRS = ("attributes", MapType(StringType(), StringType()))
MAP = pa.map_(pa.string(), pa.string())


def test_defaults_and_pickling() -> None:
    plan = plan_sink({**MASTER, "topic": "t1"}, schema(BODY))
    assert plan.topic == "t1"
    assert plan.columns == ("body",)
    assert not plan.body_is_text
    assert plan.key_column is None
    assert plan.max_in_flight == DEFAULT_MAX_IN_FLIGHT
    assert plan.batch_id_attribute == DEFAULT_BATCH_ID_ATTRIBUTE
    assert plan.task_attribute is None
    assert pickle.loads(pickle.dumps(plan)) == plan
    kwargs = plan.producer_kwargs()
    assert kwargs["masters"] == "127.0.0.1:8715"
    assert kwargs["topics"] == ("t1",)
    assert kwargs["max_in_flight_sends"] == DEFAULT_MAX_IN_FLIGHT


def test_option_names_ignore_case_and_values_are_used() -> None:
    options = {
        "MASTER": "127.0.0.1:8715",
        "Topic": "t1",
        "maxInFlight": "8",
        "BatchIdAttribute": "bid",
        "taskAttribute": "task",
        "sendTimeout": "2.5",
        "checkpointLocation": "/tmp/x",
    }
    plan = plan_sink(options, schema(("body", StringType())))
    assert (plan.max_in_flight, plan.batch_id_attribute, plan.task_attribute) == (8, "bid", "task")
    assert plan.send_timeout == 2.5
    assert plan.producer_kwargs()["send_timeout"] == 2.5
    assert plan.body_is_text
    off = plan_sink({**MASTER, "topic": "t1", "batchIdAttribute": ""}, schema(BODY))
    assert off.batch_id_attribute is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t1", "maxinflight": "0"}, "maxInFlight"),
        ({"topic": "t1", "maxinflight": "many"}, "maxInFlight"),
        ({"topic": "t1", "sendtimeout": "0"}, "sendTimeout"),
        ({"topic": "t1", "batchidattribute": "a=b"}, "batchIdAttribute"),
        ({"topic": "bad topic!"}, "topic"),
        ({"topic": "t1", "group": "g"}, "unknown option"),
    ],
)
def test_bad_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(SinkOptionError, match=message) as caught:
        plan_sink({**MASTER, **options}, schema(BODY))
    assert isinstance(caught.value, ConfigError)
    assert isinstance(caught.value, TubeMQError)


def test_master_is_required() -> None:
    with pytest.raises(SourceOptionError, match="master"):
        plan_sink({"topic": "t1"}, schema(BODY))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((("value", BinaryType()),), "'value' is not written"),
        ((BODY, ("offset", LongType())), "'offset' is not written"),
        ((("body", IntegerType()),), "'body' has type int"),
        ((BODY, ("attributes", MapType(StringType(), IntegerType()))), "'attributes' has type"),
        ((BODY, ("msg_type", BinaryType())), "'msg_type' has type binary"),
        ((BODY, ("msg_time", StringType())), "'msg_time' has type string"),
        ((BODY, ("key", StringType()), ("partition_key", StringType())), "aliases"),
        ((ATTRS,), "'body' .* is required"),
    ],
)
def test_bad_columns_are_named(fields: tuple[tuple[str, object], ...], message: str) -> None:
    with pytest.raises(SinkSchemaError, match=message):
        plan_sink({**MASTER, "topic": "t1"}, schema(*fields))


def test_topic_column_or_option_is_required() -> None:
    with pytest.raises(SinkSchemaError, match="option 'topic' or a string column 'topic'"):
        plan_sink(MASTER, schema(BODY))
    plan = plan_sink(MASTER, schema(BODY, ("topic", StringType())))
    assert plan.topic is None


def test_batch_rows_carry_every_column() -> None:
    fields = (
        BODY,
        ATTRS,
        ("msg_type", StringType()),
        ("partition_key", StringType()),
        ("topic", StringType()),
        ("msg_time", TimestampType()),
    )
    plan = plan_sink(MASTER, schema(*fields))
    when = datetime(2026, 11, 22, 8, 30)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"a", b"b"]),
            pa.array([[("k", "v")], None], type=MAP),
            pa.array(["t", None]),
            pa.array(["user-1", None]),
            pa.array(["x", "y"]),
            pa.array([when, None], type=pa.timestamp("us")),
        ],
        names=list(plan.columns),
    )
    rows = list(batch_rows(batch, plan, {"__spark_batch_id": "7"}))
    assert rows == [
        OutRow("x", b"a", {"k": "v", "__spark_batch_id": "7"}, "t", "user-1", when, 0),
        OutRow("y", b"b", {"__spark_batch_id": "7"}, None, None, None, 1),
    ]


def test_batch_rows_encode_text_and_use_the_topic_option() -> None:
    plan = plan_sink({**MASTER, "topic": "t1"}, schema(("body", StringType())))
    batch = pa.RecordBatch.from_arrays([pa.array(["héllo"])], names=["body"])
    assert list(batch_rows(batch, plan, {})) == [
        OutRow("t1", "héllo".encode(), None, None, None, None, 0)
    ]


@pytest.mark.parametrize(
    ("bodies", "attributes", "message"),
    [
        ([b"a", None], [None, None], "row 11: column 'body' is null"),
        ([b"a", b"b"], [None, [("k", None)]], "row 11: attribute 'k' is null"),
    ],
)
def test_null_values_fail_naming_the_row(
    bodies: list[bytes | None], attributes: list[object], message: str
) -> None:
    plan = plan_sink({**MASTER, "topic": "t1"}, schema(BODY, ATTRS))
    arrays = [pa.array(bodies, pa.binary()), pa.array(attributes, type=MAP)]
    batch = pa.RecordBatch.from_arrays(arrays, names=["body", "attributes"])
    with pytest.raises(InvalidMessageError, match=message):
        list(batch_rows(batch, plan, {}, first_row=10))


def test_null_topic_fails() -> None:
    plan = plan_sink(MASTER, schema(BODY, ("topic", StringType())))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a"]), pa.array([None], pa.string())], ["body", "topic"]
    )
    with pytest.raises(InvalidMessageError, match="column 'topic' is null"):
        list(batch_rows(batch, plan, {}))


def test_commit_summary_counts_rows_and_failed_tasks() -> None:
    messages = [TubeMQWriteCommit(5, 0, 0, 3, 0.1), None, TubeMQWriteCommit(7, 1, 1, 3, 0.2)]
    assert _summary(messages) == (12, 2, 1)
    assert pickle.loads(pickle.dumps(messages[0])) == messages[0]


def test_zoned_msg_time_becomes_local_wall_time() -> None:
    plan = plan_sink({**MASTER, "topic": "t1"}, schema(BODY, ("msg_time", TimestampType())))
    instant = datetime(2026, 11, 22, 8, 30, tzinfo=UTC)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a"]), pa.array([instant], type=pa.timestamp("us", tz="UTC"))],
        names=["body", "msg_time"],
    )
    (row,) = batch_rows(batch, plan, {})
    assert row.msg_time == instant.astimezone().replace(tzinfo=None)
    assert row.msg_time is not None
    assert row.msg_time.tzinfo is None


def test_batch_topics_are_the_option_or_the_column_values() -> None:
    fixed = plan_sink({**MASTER, "topic": "t1"}, schema(BODY))
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"])], names=["body"])
    assert batch_topics(batch, fixed) == {"t1"}
    per_row = plan_sink(MASTER, schema(BODY, ("topic", StringType())))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b", b"c"]), pa.array(["x", None, "y"])], names=["body", "topic"]
    )
    assert batch_topics(batch, per_row) == {"x", "y"}
