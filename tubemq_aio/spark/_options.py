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
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tubemq_aio.auth import Credentials
from tubemq_aio.config import parse_masters
from tubemq_aio.errors import ConfigError, MalformedMetaError, SourceOptionError
from tubemq_aio.protocol.consumer_meta import (
    PartitionKey,
    validate_filters,
    validate_group_name,
    validate_topic_name,
)

__all__ = [
    "CLIENT_OPTION_NAMES",
    "SOURCE_OPTION_NAMES",
    "ClientSettings",
    "OffsetSpec",
    "SourceOptions",
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
        "tlsserverhostname",
    }
)

#: Options the source reads on top of :data:`CLIENT_OPTION_NAMES`.
SOURCE_OPTION_NAMES = frozenset(
    {
        "topic",
        "group",
        "msgtypes",
        "startingoffsets",
        "endingoffsets",
        "maxoffsetspertrigger",
        "minpartitions",
        "failondataloss",
        "readtimeout",
    }
)

#: Group used when the ``group`` option is absent.
DEFAULT_GROUP = "spark-tubemq"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise SourceOptionError(f"option {name!r} must be true or false, got {value!r}")


def _number(name: str, value: str, *, low: float, high: float) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SourceOptionError(f"option {name!r} must be a number, got {value!r}") from None
    if not low <= number <= high:
        raise SourceOptionError(f"option {name!r} must be in [{low:g}, {high:g}], got {value!r}")
    return number


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise SourceOptionError(f"option {name!r} must be an integer, got {value!r}") from None
    if number < 1:
        raise SourceOptionError(f"option {name!r} must be at least 1, got {value!r}")
    return number


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
        tls_ca_file: CA bundle to trust (``tlsCaFile``); None uses the system store.
        tls_server_hostname: one host name to check for every peer (``tlsServerHostname``); None
            checks each master and broker against the host it is reached at.
    """

    masters: str
    rpc_timeout: float | None = None
    connect_timeout: float | None = None
    auth_user: str | None = None
    auth_password: str | None = None
    tls: bool = False
    tls_ca_file: str | None = None
    tls_server_hostname: str | None = None

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
            context = ssl.create_default_context(cafile=self.tls_ca_file)
            result["ssl_context"] = context
            result["tls_server_hostname"] = self.tls_server_hostname
        return result


def parse_client_settings(options: Mapping[str, str]) -> ClientSettings:
    """Parse the connection options (``master``, ``rpcTimeout``, ``connectTimeout``, ``authUser``,
    ``authPassword``, ``tls``, ``tlsCaFile``, ``tlsServerHostname``); other names are ignored.

    Raises:
        SourceOptionError: ``master`` is missing or an option value is invalid.
    """
    opts = _lower(options)
    master = opts.get("master", "").strip()
    if not master:
        raise SourceOptionError("option 'master' is required (host:port[,host:port...])")
    try:
        masters = ",".join(str(m) for m in parse_masters(master))
    except ConfigError as exc:
        raise SourceOptionError(f"option 'master' is invalid: {exc}") from None
    rpc = opts.get("rpctimeout")
    connect = opts.get("connecttimeout")
    user = opts.get("authuser")
    if user is not None and not user.strip():
        raise SourceOptionError("option 'authUser' must not be blank")
    if user is None and "authpassword" in opts:
        raise SourceOptionError("option 'authPassword' needs option 'authUser'")
    tls = _bool("tls", opts["tls"]) if "tls" in opts else False
    for name in ("tlscafile", "tlsserverhostname"):
        if name in opts and not tls:
            raise SourceOptionError(f"option {name!r} needs option 'tls' = true")
    return ClientSettings(
        masters=masters,
        rpc_timeout=None if rpc is None else _number("rpcTimeout", rpc, low=3, high=600),
        connect_timeout=None
        if connect is None
        else _number("connectTimeout", connect, low=0.001, high=120),
        auth_user=user,
        auth_password=opts.get("authpassword"),
        tls=tls,
        tls_ca_file=opts.get("tlscafile"),
        tls_server_hostname=opts.get("tlsserverhostname"),
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
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())  # type: ignore[arg-type]
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SourceOptionError(
            f"option {name!r} must be 'earliest', 'latest' or a JSON object "
            f'{{"brokerId:topic:partitionId": offset}}, got {value!r}'
        )
    pairs: list[tuple[str, int]] = []
    for key, offset in data.items():
        try:
            parsed = PartitionKey.parse(key)
        except MalformedMetaError:
            raise SourceOptionError(f"option {name!r}: bad partition key {key!r}") from None
        if parsed.topic not in topics:
            raise SourceOptionError(f"option {name!r}: topic of {key!r} is not in option 'topic'")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise SourceOptionError(f"option {name!r}: offset of {key!r} must be an int >= 0")
        pairs.append((parsed.format(), offset))
    return OffsetSpec("json", tuple(sorted(pairs)))


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

    @property
    def planner_group(self) -> str:
        """The group of the driver's planning consumer (never the executors' group)."""
        return f"{self.group}_planner"


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
    unknown = sorted(set(opts) - CLIENT_OPTION_NAMES - SOURCE_OPTION_NAMES - {"path"})
    if unknown:
        raise SourceOptionError(f"unknown option(s) {unknown} for the tubemq source")
    client = parse_client_settings(opts)
    topic_text = opts.get("topic", "")
    try:
        topics = tuple(dict.fromkeys(validate_topic_name(t) for t in topic_text.split(",") if t))
        msg_types = tuple(
            sorted(validate_filters([t.strip() for t in opts.get("msgtypes", "").split(",") if t]))
        )
        group = validate_group_name(opts.get("group", DEFAULT_GROUP).strip())
    except ConfigError as exc:
        raise SourceOptionError(
            f"option 'topic', 'msgTypes' or 'group' is invalid: {exc}"
        ) from None
    if not topics:
        raise SourceOptionError("option 'topic' is required (a comma list of topics)")
    default_start = "latest" if streaming else "earliest"
    starting = parse_offset_spec(
        "startingOffsets", opts.get("startingoffsets", default_start), topics
    )
    if streaming and "endingoffsets" in opts:
        raise SourceOptionError("option 'endingOffsets' is for batch reads only")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise SourceOptionError("option 'maxOffsetsPerTrigger' is for streaming reads only")
    ending = parse_offset_spec("endingOffsets", opts.get("endingoffsets", "latest"), topics)
    if ending.kind == "earliest":
        raise SourceOptionError("option 'endingOffsets' must be 'latest' or a JSON object")
    limit = opts.get("maxoffsetspertrigger")
    min_parts = opts.get("minpartitions")
    return SourceOptions(
        client=client,
        topics=topics,
        msg_types=msg_types,
        group=group,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=None
        if limit is None
        else _positive_int("maxOffsetsPerTrigger", limit),
        min_partitions=None if min_parts is None else _positive_int("minPartitions", min_parts),
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        read_timeout=_number("readTimeout", opts.get("readtimeout", "120"), low=1, high=3600),
    )
