"""Spark data source options: parsed and validated once into frozen, picklable values.

Spark hands a data source its options as strings (names case-insensitive). Everything is checked
on the driver when the reader is built, so a bad option fails the query before any task starts;
the parsed values travel to the executors inside pickled input partitions. An ``ssl.SSLContext``
cannot be pickled, so TLS is kept as plain settings and the context is built where it is used.

:func:`client_options` (connection settings shared by the source and the sink) returns the
keyword arguments of :class:`~tubemq_aio.config.ClientConfig`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, cast

from tubemq_aio.auth import Credentials
from tubemq_aio.checks import Checks
from tubemq_aio.config import parse_masters
from tubemq_aio.errors import (
    ConfigError,
    ConsumerConfigError,
    MalformedMetaError,
    SourceOptionError,
)
from tubemq_aio.protocol.consumer_meta import PartitionKey
from tubemq_aio.protocol.consumer_names import (
    check_topic_name,
    planner_group,
    validate_filters,
    validate_group_name,
)
from tubemq_aio.protocol.legacy_framing import FRAMINGS, Framing
from tubemq_aio.protocol.time_search import parse_time_text
from tubemq_aio.tls import TlsFiles

__all__ = [
    "CLIENT_OPTION_NAMES",
    "SOURCE_OPTION_NAMES",
    "ClientSettings",
    "OffsetSpec",
    "SourceOptions",
    "StartTimes",
    "client_options",
    "parse_client_settings",
    "parse_source_options",
]


#: Connection options shared by the source and the sink (lower case: Spark ignores case).
CLIENT_OPTION_NAMES = frozenset(
    {
        "master",
        "rpctimeout",
        "connecttimeout",
        "authuser",
        "authpassword",
        "tls",
        "tlscafile",
        "tlscertfile",
        "tlskeyfile",
        "tlsserverhostname",
        "framing",
    }
)

#: Options the source reads on top of :data:`CLIENT_OPTION_NAMES`.
SOURCE_OPTION_NAMES = frozenset(
    {
        "topic",
        "group",
        "msgtypes",
        "startingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "msgtimezone",
        "endingoffsets",
        "maxoffsetspertrigger",
        "minpartitions",
        "failondataloss",
        "readtimeout",
    }
)

#: The largest offset a broker request carries (an int64 on the wire).
_INT64_MAX = 2**63 - 1

#: Group used when the ``group`` option is absent.
DEFAULT_GROUP = "spark-tubemq"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _option(name: str) -> str:
    return f"option {name!r}"


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Connection settings of one TubeMQ client, picklable.

    Attributes:
        masters: ``host:port`` list as given in the ``master`` option (validated).
        rpc_timeout: seconds per RPC (``rpcTimeout``), None for the client default.
        connect_timeout: seconds per TCP/TLS connect (``connectTimeout``), None for the default.
        auth_user: user name (``authUser``) when the cluster authenticates clients.
        auth_password: password (``authPassword``); not shown by ``repr``.
        tls: whether to use TLS (``tls``); list the TLS ports of the masters then.
        tls_files: the PEM files (:class:`~tubemq_aio.tls.TlsFiles`): the CA bundle to trust
            (``tlsCaFile``; none uses the system store), the client certificate
            (``tlsCertFile``, for clusters that require one) and its private key
            (``tlsKeyFile``, when not in the certificate file).
        tls_server_hostname: one host name to check for every peer (``tlsServerHostname``); None
            checks each master and broker against the host it is reached at.
        framing: ``standard``, or ``legacy-length`` for TubeMQ servers 1.1.0 and 1.2.0
            (``framing``; docs/protocol/wire.md §1.7).
    """

    masters: str
    rpc_timeout: float | None = None
    connect_timeout: float | None = None
    auth_user: str | None = None
    auth_password: str | None = None
    tls: bool = False
    tls_files: TlsFiles = field(default_factory=TlsFiles)
    tls_server_hostname: str | None = None
    framing: Framing = "standard"

    def __repr__(self) -> str:
        return (
            f"ClientSettings(masters={self.masters!r}, tls={self.tls}, "
            f"auth_user={self.auth_user!r})"
        )

    def kwargs(self) -> dict[str, object]:
        """The :class:`~tubemq_aio.config.ClientConfig` keyword arguments (builds the TLS context
        in the calling process)."""
        result: dict[str, object] = {"masters": self.masters}
        if self.rpc_timeout is not None:
            result["rpc_timeout"] = self.rpc_timeout
        if self.connect_timeout is not None:
            result["connect_timeout"] = self.connect_timeout
        if self.auth_user is not None:
            result["credentials"] = Credentials(self.auth_user, self.auth_password or "")
        if self.tls:
            result["ssl_context"] = self.tls_files.context()
            result["tls_server_hostname"] = self.tls_server_hostname
        if self.framing != "standard":
            result["framing"] = self.framing
        return result


def parse_client_settings(options: Mapping[str, str]) -> ClientSettings:
    """Parse the connection options (``master``, ``rpcTimeout``, ``connectTimeout``, ``authUser``,
    ``authPassword``, ``tls``, ``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``,
    ``tlsServerHostname``, ``framing``); other names
    are ignored.

    Raises:
        SourceOptionError: ``master`` is missing or an option value is invalid (every problem
            is named).
    """
    checks = Checks("tubemq options", error=SourceOptionError)
    settings = _client_settings(checks, _lower(options))
    checks.done()
    return settings


def _client_settings(checks: Checks, opts: Mapping[str, str]) -> ClientSettings:
    """The connection settings of lower-cased ``opts``; problems go to ``checks``."""
    master = opts.get("master", "").strip()
    masters = ""
    if not master:
        checks.problem("option 'master' is required (host:port[,host:port...])")
    else:
        try:
            masters = ",".join(str(m) for m in parse_masters(master))
        except ConfigError as exc:
            checks.problem(f"option 'master' is invalid: {exc}")
    rpc = opts.get("rpctimeout")
    connect = opts.get("connecttimeout")
    user = opts.get("authuser")
    if user is not None:
        checks.text(_option("authUser"), user)
    elif "authpassword" in opts:
        checks.problem("option 'authPassword' needs option 'authUser'")
    tls = checks.flag_text(_option("tls"), opts["tls"]) if "tls" in opts else False
    for name in ("tlscafile", "tlscertfile", "tlskeyfile", "tlsserverhostname"):
        if name in opts and not tls:
            checks.problem(f"option {name!r} needs option 'tls' = true")
    files = TlsFiles(opts.get("tlscafile"), opts.get("tlscertfile"), opts.get("tlskeyfile"))
    for problem in files.problems():
        checks.problem(f"{problem} (options 'tlsKeyFile' and 'tlsCertFile')")
    framing = opts.get("framing", "standard")
    checks.choice(_option("framing"), framing, FRAMINGS)
    return ClientSettings(
        masters=masters,
        rpc_timeout=None
        if rpc is None
        else checks.number_text(_option("rpcTimeout"), rpc, low=3, high=600, unit="seconds"),
        connect_timeout=None
        if connect is None
        else checks.number_text(
            _option("connectTimeout"), connect, low=0.001, high=120, unit="seconds"
        ),
        auth_user=user,
        auth_password=opts.get("authpassword"),
        tls=tls,
        tls_files=files,
        tls_server_hostname=opts.get("tlsserverhostname"),
        framing=cast(Framing, framing),
    )


def client_options(options: Mapping[str, str]) -> dict[str, object]:
    """The :class:`~tubemq_aio.config.ClientConfig` keyword arguments of Spark ``options``.

    Shared by the source and the sink: masters, credentials, TLS context and RPC timeouts.
    Options other than :data:`CLIENT_OPTION_NAMES` are ignored.

    Raises:
        SourceOptionError: ``master`` is missing or an option value is invalid.
    """
    return parse_client_settings(options).kwargs()


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or explicit offsets.

    Attributes:
        kind: ``"earliest"``, ``"latest"`` or ``"json"``.
        offsets: for ``"json"``: ``(partition_key, offset)`` pairs sorted by key; a partition not
            listed starts at its earliest offset (ends at its latest).
    """

    kind: Literal["earliest", "latest", "json"]
    offsets: tuple[tuple[str, int], ...] = ()

    def as_dict(self) -> dict[str, int]:
        """The explicit offsets as a dict."""
        return dict(self.offsets)


def parse_offset_spec(name: str, value: str, topics: tuple[str, ...]) -> OffsetSpec:
    """Parse an offsets option value.

    Raises:
        SourceOptionError: not ``earliest``/``latest``/a JSON object of key → int ≥ 0, or a key
            that is malformed or of a topic not read.
    """
    checks = Checks("tubemq source", error=SourceOptionError)
    spec = _offset_spec(checks, name, value, topics)
    checks.done()
    return spec


def _offset_spec(checks: Checks, name: str, value: str, topics: tuple[str, ...]) -> OffsetSpec:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())  # type: ignore[arg-type]
    items = _partition_items(checks, name, text, topics)
    if items is None:
        checks.problem(
            f"option {name!r} must be 'earliest', 'latest' or a JSON object "
            f'{{"brokerId:topic:partitionId": offset}}, got {value!r}'
        )
        return OffsetSpec("latest")
    pairs = [
        (key, checks.integer(f"option {name!r}: offset of {key!r}", offset, low=0, high=_INT64_MAX))
        for key, offset in items
    ]
    return OffsetSpec("json", tuple(sorted(pairs)))


def _partition_items(
    checks: Checks, name: str, text: str, topics: tuple[str, ...]
) -> list[tuple[str, object]] | None:
    """The ``(partition key, value)`` pairs of a JSON object option, keys checked and
    normalised (a bad one is a problem of ``checks`` and left out); ``None`` when ``text`` is
    not a JSON object."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    items: list[tuple[str, object]] = []
    for key, value in data.items():
        try:
            parsed = PartitionKey.parse(key)
        except MalformedMetaError:
            checks.problem(f"option {name!r}: bad partition key {key!r}")
            continue
        if parsed.topic not in topics:
            checks.problem(f"option {name!r}: topic of {key!r} is not in option 'topic'")
        items.append((parsed.format(), value))
    return items


@dataclass(frozen=True, slots=True)
class StartTimes:
    """``startingTimestamp`` / ``startingOffsetsByTimestamp``: start each partition at its first
    message stamped (``msg_time``) at or after a time (docs/protocol/time.md).

    Attributes:
        every: the time of every partition (``startingTimestamp``), or None.
        by_partition: ``(partition_key, time)`` pairs (``startingOffsetsByTimestamp``); a
            partition not listed starts at its earliest offset.
    """

    every: datetime | None
    by_partition: tuple[tuple[str, datetime], ...] = ()

    def for_keys(self, keys: Iterable[str]) -> dict[str, datetime]:
        """The time to search for each partition of ``keys`` (and each listed one)."""
        if self.every is not None:
            return dict.fromkeys(keys, self.every)
        return dict(self.by_partition)


def _time_value(checks: Checks, name: str, value: object) -> datetime | None:
    """A time option value: epoch milliseconds (Spark's Kafka source form, an integer or its
    digits) or an RFC 3339 text with a zone."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            checks.problem(f"option {name!r}: {value} ms is out of range")
            return None
    if isinstance(value, str):
        try:
            return parse_time_text(value)
        except ConsumerConfigError as exc:
            checks.problem(f"option {name!r}: {exc}")
            return None
    checks.problem(f"option {name!r}: want epoch milliseconds or an RFC 3339 time, got {value!r}")
    return None


def _start_times(
    checks: Checks, opts: Mapping[str, str], topics: tuple[str, ...]
) -> StartTimes | None:
    every_text = opts.get("startingtimestamp")
    by_text = opts.get("startingoffsetsbytimestamp")
    given = [
        n
        for n, v in (
            ("startingOffsets", opts.get("startingoffsets")),
            ("startingTimestamp", every_text),
            ("startingOffsetsByTimestamp", by_text),
        )
        if v is not None
    ]
    if len(given) > 1:
        checks.problem(f"options {given} exclude each other: give one starting position")
        return None
    if every_text is not None:
        every = _time_value(checks, "startingTimestamp", every_text)
        return None if every is None else StartTimes(every)
    if by_text is None:
        return None
    name = "startingOffsetsByTimestamp"
    items = _partition_items(checks, name, by_text, topics)
    if items is None or (not items and checks.ok):  # not an object, or an empty one
        checks.problem(
            f"option {name!r} must be a JSON object "
            f'{{"brokerId:topic:partitionId": time}}, got {by_text!r}'
        )
    if not items:
        return None
    pairs: list[tuple[str, datetime]] = []
    for key, value in items:
        when = _time_value(checks, f"{name} {key}", value)
        if when is not None:
            pairs.append((key, when))
    return StartTimes(None, tuple(sorted(pairs)))


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Every option of the TubeMQ source, validated.

    Attributes:
        client: connection settings.
        topics: topics to read (``topic``: comma list).
        msg_types: ``msgType`` filter applied to every topic (``msgTypes``: comma list; empty
            reads all).
        group: consumer group of the executors' reads (``group``); the driver's planner uses
            ``{group}_planner``.
        starting: ``startingOffsets`` (default ``latest`` for streams, ``earliest`` for batch).
        starting_times: ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (instead of
            ``startingOffsets``), resolved by a time search on the driver when the query starts.
        msg_time_zone: the IANA zone producers wrote ``msg_time`` in (``msgTimeZone``, default
            ``UTC``); the time search reads the stamps in it (Java producers write local time).
        ending: ``endingOffsets`` (batch reads only; default ``latest``).
        max_offsets_per_trigger: messages per micro-batch over all partitions, None = no limit.
        min_partitions: split partitions so a batch has at least this many Spark tasks.
        fail_on_data_loss: raise when a planned offset is no longer on the broker.
        read_timeout: seconds a task may wait for one positioned read.
    """

    client: ClientSettings
    topics: tuple[str, ...]
    msg_types: tuple[str, ...]
    group: str
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    read_timeout: float
    starting_times: StartTimes | None = None
    msg_time_zone: str = "UTC"

    @property
    def planner_group(self) -> str:
        """The group of the driver's planning consumer (never the executors' group)."""
        return planner_group(self.group)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Parse and validate the source options.

    Args:
        options: the Spark options (names in any case).
        streaming: whether for ``readStream`` (``endingOffsets`` refused, ``startingOffsets``
            defaults to ``latest``) or ``read`` (``maxOffsetsPerTrigger`` refused, defaults
            ``earliest`` → ``latest``).

    Raises:
        SourceOptionError: an option is unknown, missing or invalid (the message names it).
    """
    opts = _lower(options)
    checks = Checks("tubemq source", error=SourceOptionError)
    unknown = sorted(set(opts) - CLIENT_OPTION_NAMES - SOURCE_OPTION_NAMES - {"path"})
    if unknown:
        checks.problem(f"unknown option(s) {unknown} for the tubemq source")
    client = _client_settings(checks, opts)
    topic_text = opts.get("topic", "")
    topics: tuple[str, ...] = ()
    msg_types: tuple[str, ...] = ()
    group = DEFAULT_GROUP
    pieces = [t for t in topic_text.split(",") if t]
    if not pieces:
        checks.problem("option 'topic' is required (a comma list of topics)")
    named = (check_topic_name(checks, t, name="option 'topic'") for t in pieces)
    topics = tuple(dict.fromkeys(t for t in named if t))
    try:
        msg_types = tuple(
            sorted(validate_filters([t.strip() for t in opts.get("msgtypes", "").split(",") if t]))
        )
    except ConfigError as exc:
        checks.problem(f"option 'msgTypes' is invalid: {exc}")
    try:
        group = validate_group_name(opts.get("group", DEFAULT_GROUP).strip())
        planner_group(group)  # the driver's planner registers it too: refused when too long
    except ConfigError as exc:
        checks.problem(f"option 'group' is invalid (the driver also uses '<group>_planner'): {exc}")
    default_start = "latest" if streaming else "earliest"
    starting = _offset_spec(
        checks, "startingOffsets", opts.get("startingoffsets", default_start), topics
    )
    starting_times = _start_times(checks, opts, topics)
    if streaming and "endingoffsets" in opts:
        checks.problem("option 'endingOffsets' is for batch reads only")
    if not streaming and "maxoffsetspertrigger" in opts:
        checks.problem("option 'maxOffsetsPerTrigger' is for streaming reads only")
    ending = _offset_spec(checks, "endingOffsets", opts.get("endingoffsets", "latest"), topics)
    if ending.kind == "earliest":
        checks.problem("option 'endingOffsets' must be 'latest' or a JSON object")
    limit = opts.get("maxoffsetspertrigger")
    min_parts = opts.get("minpartitions")
    zone_name = opts.get("msgtimezone", "UTC")
    checks.time_zone(_option("msgTimeZone"), zone_name)
    parsed = SourceOptions(
        client=client,
        topics=topics,
        msg_types=msg_types,
        group=group,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=None
        if limit is None
        else checks.integer_text(_option("maxOffsetsPerTrigger"), limit, low=1),
        min_partitions=None
        if min_parts is None
        else checks.integer_text(_option("minPartitions"), min_parts, low=1),
        fail_on_data_loss=checks.flag_text(
            _option("failOnDataLoss"), opts.get("failondataloss", "true")
        ),
        read_timeout=checks.number_text(
            _option("readTimeout"),
            opts.get("readtimeout", "120"),
            low=1,
            high=3600,
            unit="seconds",
        ),
        starting_times=starting_times,
        msg_time_zone=zone_name,
    )
    checks.done()
    return parsed
