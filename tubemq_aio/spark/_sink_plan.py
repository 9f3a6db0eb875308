"""What the Spark sink writes: options and input columns checked once on the driver.

:func:`plan_sink` turns the Spark options and the DataFrame schema into a frozen, picklable
:class:`SinkPlan` (errors name the offending option or column, before any task starts);
:func:`batch_rows` turns one Arrow record batch into the arguments of the producer's sends.
Nothing here does I/O, so it is unit-tested without Spark or a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from pyspark.sql.types import StructType

from tubemq_aio.checks import Checks
from tubemq_aio.errors import InvalidMessageError, SinkOptionError, SinkSchemaError
from tubemq_aio.protocol.consumer_names import check_topic_name
from tubemq_aio.spark._options import CLIENT_OPTION_NAMES, ClientSettings, parse_client_settings

__all__ = [
    "DEFAULT_BATCH_ID_ATTRIBUTE",
    "DEFAULT_MAX_IN_FLIGHT",
    "SINK_OPTION_NAMES",
    "ArrowBatch",
    "OutRow",
    "SinkPlan",
    "batch_rows",
    "batch_topics",
    "plan_sink",
]

#: Attribute that carries the Spark micro-batch id of a streaming write (option
#: ``batchIdAttribute``; an empty value switches it off).
DEFAULT_BATCH_ID_ATTRIBUTE = "__spark_batch_id"
#: Sends outstanding per Spark task (option ``maxInFlight``).
DEFAULT_MAX_IN_FLIGHT = 256
#: Upper bound of ``maxInFlight``.
MAX_IN_FLIGHT_LIMIT = 65536

#: Options the sink reads on top of the connection options (lower case: Spark ignores case).
SINK_OPTION_NAMES = frozenset(
    {"topic", "maxinflight", "batchidattribute", "taskattribute", "sendtimeout"}
)
# Spark adds these to the options of a write itself.
_SPARK_OPTION_NAMES = frozenset({"path", "checkpointlocation"})


#: Column name -> accepted Spark types (``simpleString``; nullability is not compared) and what
#: each is for.
_COLUMNS: dict[str, tuple[tuple[str, ...], str]] = {
    "body": (("binary", "string"), "binary or string, the message body (required)"),
    "attributes": (("map<string,string>",), "map<string,string>, user attributes"),
    "msg_type": (("string",), "string, the message type (consumer filter item)"),
    "key": (("string",), "string, routing key: same key, same partition"),
    "partition_key": (("string",), "string, routing key (alias of 'key')"),
    "topic": (("string",), "string, the topic of the row when option 'topic' is absent"),
    "msg_time": (("timestamp",), "timestamp, the message time (minute precision)"),
}


@dataclass(frozen=True, slots=True)
class SinkPlan:
    """Everything a write task needs, validated on the driver and pickled to the executors.

    Attributes:
        client: connection settings (the TLS context is built on the executor).
        topic: the ``topic`` option; None means every row names its topic in column ``topic``.
        columns: the input column names in schema order.
        body_is_text: the ``body`` column is a string (encoded as UTF-8).
        key_column: ``"key"`` or ``"partition_key"`` when one is present.
        max_in_flight: sends outstanding per task (``maxInFlight``).
        batch_id_attribute: attribute for the micro-batch id of streaming writes, or None.
        task_attribute: attribute for ``"<partitionId>:<attemptNumber>"`` of the task, or None.
        send_timeout: seconds per send attempt (``sendTimeout``), None for the client default.
    """

    client: ClientSettings
    topic: str | None
    columns: tuple[str, ...]
    body_is_text: bool
    key_column: str | None
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    batch_id_attribute: str | None = DEFAULT_BATCH_ID_ATTRIBUTE
    task_attribute: str | None = None
    send_timeout: float | None = None

    def producer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the task's :class:`~tubemq_aio.Producer`."""
        kwargs: dict[str, Any] = dict(self.client.kwargs())
        kwargs["topics"] = (self.topic,) if self.topic else ()
        kwargs["max_in_flight_sends"] = self.max_in_flight
        if self.send_timeout is not None:
            kwargs["send_timeout"] = self.send_timeout
        return kwargs


def _attribute_name(checks: Checks, name: str, value: str) -> str | None:
    text = value.strip()
    if not text:
        return None
    if "," in text or "=" in text or "$" in text:
        checks.problem(f"option {name!r} may not contain ',', '=' or '$': {value!r}")
    return text


def _check_columns(schema: StructType, has_topic_option: bool) -> tuple[bool, str | None]:
    checks = Checks("tubemq sink", error=SinkSchemaError)
    names = [field.name for field in schema.fields]
    for field in schema.fields:
        spec = _COLUMNS.get(field.name)
        if spec is None:
            known = ", ".join(_COLUMNS)
            checks.problem(
                f"column {field.name!r} is not written by the tubemq sink (known columns: {known});"
                " drop or rename it"
            )
            continue
        types, meaning = spec
        if field.dataType.simpleString() not in types:
            checks.problem(
                f"column {field.name!r} has type {field.dataType.simpleString()}; "
                f"expected {meaning}"
            )
    if len(set(names)) != len(names):
        checks.problem(f"duplicate column names in {names}")
    if "body" not in names:
        checks.problem("column 'body' (binary or string) is required")
    if "key" in names and "partition_key" in names:
        checks.problem("columns 'key' and 'partition_key' are aliases: give only one")
    if not has_topic_option and "topic" not in names:
        checks.problem("give option 'topic' or a string column 'topic'")
    checks.done()
    key_column = "key" if "key" in names else "partition_key" if "partition_key" in names else None
    return schema["body"].dataType.simpleString() == "string", key_column


def plan_sink(options: Mapping[str, str], schema: StructType) -> SinkPlan:
    """Validate the sink's options and input columns.

    Args:
        options: the Spark write options (names in any case).
        schema: the schema of the DataFrame being written.

    Returns:
        The picklable plan of the write.

    Raises:
        SinkOptionError: an option is unknown or invalid (every problem is named).
        SourceOptionError: a connection option (``master``, TLS, auth) is missing or invalid.
        SinkSchemaError: a column is missing, unknown or of the wrong type.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    checks = Checks("tubemq sink", error=SinkOptionError)
    unknown = sorted(set(opts) - CLIENT_OPTION_NAMES - SINK_OPTION_NAMES - _SPARK_OPTION_NAMES)
    if unknown:
        checks.problem(f"unknown option(s) {unknown} for the tubemq sink")
    client = parse_client_settings(opts)  # its own error class: SourceOptionError
    topic: str | None = None
    if opts.get("topic", "").strip():
        topic = check_topic_name(checks, opts["topic"], name="option 'topic'")
    max_in_flight = checks.integer_text(
        "option 'maxInFlight'",
        opts.get("maxinflight", str(DEFAULT_MAX_IN_FLIGHT)),
        low=1,
        high=MAX_IN_FLIGHT_LIMIT,
    )
    send_timeout: float | None = None
    if "sendtimeout" in opts:
        send_timeout = checks.number_text(
            "option 'sendTimeout'",
            opts["sendtimeout"],
            low=0,
            high=600,
            low_open=True,
            unit="seconds",
        )
    batch_id_attribute = _attribute_name(
        checks, "batchIdAttribute", opts.get("batchidattribute", DEFAULT_BATCH_ID_ATTRIBUTE)
    )
    task_attribute = _attribute_name(checks, "taskAttribute", opts.get("taskattribute", ""))
    checks.done()
    body_is_text, key_column = _check_columns(schema, topic is not None)
    return SinkPlan(
        client=client,
        topic=topic,
        columns=tuple(schema.fieldNames()),
        body_is_text=body_is_text,
        key_column=key_column,
        max_in_flight=max_in_flight,
        batch_id_attribute=batch_id_attribute,
        task_attribute=task_attribute,
        send_timeout=send_timeout,
    )


class ArrowColumn(Protocol):
    """The part of ``pyarrow.Array`` the sink uses."""

    def to_pylist(self) -> list[Any]:
        """The values as Python objects."""
        ...


class ArrowBatch(Protocol):
    """The part of ``pyarrow.RecordBatch`` the sink uses."""

    @property
    def num_rows(self) -> int:
        """Rows in the batch."""
        ...

    def column(self, i: int) -> ArrowColumn:
        """Column ``i``."""
        ...


class OutRow(NamedTuple):
    """The arguments of one send, and the row's index within its task (for error messages)."""

    topic: str
    body: bytes
    attributes: dict[str, str] | None
    msg_type: str | None
    key: str | None
    msg_time: datetime | None
    row: int


def _column(batch: ArrowBatch, plan: SinkPlan, name: str) -> list[Any] | None:
    if name not in plan.columns:
        return None
    return batch.column(plan.columns.index(name)).to_pylist()


def batch_topics(batch: ArrowBatch, plan: SinkPlan) -> set[str]:
    """The topics the rows of ``batch`` go to (nulls left out: they fail in :func:`batch_rows`)."""
    if plan.topic is not None:
        return {plan.topic}
    return {t for t in _column(batch, plan, "topic") or () if t is not None}


def batch_rows(
    batch: ArrowBatch, plan: SinkPlan, extra: Mapping[str, str], first_row: int = 0
) -> Iterator[OutRow]:
    """The sends of one Arrow batch, in row order.

    Args:
        batch: the batch (columns in the order of ``plan.columns``).
        plan: the write plan.
        extra: attributes added to every message (batch id, task); they override a row's own.
        first_row: index of the batch's first row within the task (for error messages).

    Yields:
        One :class:`OutRow` per row.

    Raises:
        InvalidMessageError: a row has a null body, topic or attribute value.
    """
    n = batch.num_rows
    bodies = _column(batch, plan, "body") or []
    attrs = _column(batch, plan, "attributes")
    types = _column(batch, plan, "msg_type")
    keys = _column(batch, plan, plan.key_column) if plan.key_column else None
    topics = _column(batch, plan, "topic") if plan.topic is None else None
    times = _column(batch, plan, "msg_time")
    extra_items = dict(extra)
    for i in range(n):
        body = bodies[i]
        if body is None:
            raise InvalidMessageError(f"row {first_row + i}: column 'body' is null")
        if plan.body_is_text:
            body = body.encode()
        topic = plan.topic if topics is None else topics[i]
        if topic is None:
            raise InvalidMessageError(f"row {first_row + i}: column 'topic' is null")
        attributes = _attributes(
            attrs[i] if attrs is not None else None, extra_items, first_row + i
        )
        yield OutRow(
            topic,
            body,
            attributes,
            types[i] if types is not None else None,
            keys[i] if keys is not None else None,
            _local(times[i]) if times is not None else None,
            first_row + i,
        )


def _local(value: datetime | None) -> datetime | None:
    """An instant from Arrow as this machine's wall time: ``$msgTime$`` is a local wall time
    (the Java producer writes its local time, and consumers read it back as local)."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone().replace(tzinfo=None)


def _attributes(
    items: Sequence[tuple[str, str | None]] | None, extra: dict[str, str], row: int
) -> dict[str, str] | None:
    if not items:
        return extra or None
    result: dict[str, str] = {}
    for key, value in items:
        if value is None:
            raise InvalidMessageError(f"row {row}: attribute {key!r} is null")
        result[key] = value
    result.update(extra)
    return result
