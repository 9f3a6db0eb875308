"""URL query keys beyond a config's own field names: the Go client's, and the consumer options
that are not a single value (topics with filters, bound consumption, TLS files).

:meth:`~tubemq_aio.config.ClientConfig.from_url` hands every ``key=value`` pair here first;
pairs this module does not know go back to it, to be matched with the field names.

The Go client (``tubemq-client-go`` ``config.ParseAddress``) writes durations in
milliseconds, ``consumePosition`` as -1/0/1, one ``topic`` per key followed by its
``filters``, and its TLS and auth settings under their own names; each maps onto a field here
(docs/features.md lists the table). ``logPath``, ``logLevel``, ``maxPartCheckPeriod`` and
``partCheckSlice`` are accepted with no effect: logging belongs to the application, and
:meth:`wait_for_assignment` takes its deadline as an argument.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tubemq_aio.auth import Credentials
from tubemq_aio.checks import Checks, integer_of_text, shown
from tubemq_aio.errors import ConfigError
from tubemq_aio.tls import TlsFiles

__all__ = ["GO_KEYS", "IGNORED_GO_KEYS", "BoundParts", "translate_query"]

#: Go key -> (our field, kind): "ms" milliseconds to seconds, "int", "bool".
GO_KEYS: dict[str, tuple[str, str]] = {
    "readTimeout": ("rpc_timeout", "ms"),
    "heartbeatInterval": ("heartbeat_interval", "ms"),
    "heartbeatMaxRetryTimes": ("heartbeat_max_retries", "int"),
    "heartbeatAfterFail": ("heartbeat_retry_backoff", "ms"),
    "msgNotFoundWait": ("msg_not_found_wait", "ms"),
    "rebConfirmWait": ("rebalance_confirm_wait", "ms"),
    "maxConfirmWait": ("confirm_timeout", "ms"),
    "shutdownRebWait": ("close_rebalance_wait", "ms"),
    "maxSubInfoReportInterval": ("subscription_report_interval", "int"),
    "tlsServerName": ("tls_server_hostname", "str"),
}

#: Go keys accepted with no effect (see the module docstring).
IGNORED_GO_KEYS = frozenset({"logPath", "logLevel", "maxPartCheckPeriod", "partCheckSlice"})

#: Go ``consumePosition`` -> ``consume_from``.
_GO_POSITIONS = {"-1": "earliest", "0": "latest", "1": "latest_always"}

#: The bound-consumption keys: the Go client's and ours.
_BOUND_KEYS = frozenset(
    {
        "boundConsume",
        "sessionKey",
        "sourceCount",
        "selectBig",
        "bound_session_key",
        "bound_source_count",
        "bound_select_big",
        "bound_offsets",
    }
)

#: The Go client's bound-consumption keys and ours that mean the same.
_BOUND_SYNONYMS = (
    ("sessionKey", "bound_session_key"),
    ("sourceCount", "bound_source_count"),
    ("selectBig", "bound_select_big"),
)

#: TLS file keys (Go's and ours) -> which file.
_TLS_FILES = {
    "CACertFile": "ca",
    "tls_ca_file": "ca",
    "tlsCertFile": "cert",
    "tls_cert_file": "cert",
    "tlsKeyFile": "key",
    "tls_key_file": "key",
}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(checks: Checks, key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered not in _TRUE + _FALSE:
        checks.problem(f"option {key!r} needs true or false, got {shown(value)}")
    return lowered in _TRUE


def _int(checks: Checks, key: str, value: str) -> int:
    number = integer_of_text(value)
    if number is None:
        checks.problem(f"option {key!r} needs an integer, got {shown(value)}")
        return 0
    return number


def _bound_offsets(checks: Checks, value: str) -> dict[str, int]:
    """``brokerId:topic:partitionId@offset,...``."""
    offsets: dict[str, int] = {}
    for item in (v.strip() for v in value.split(",")):
        key, at, offset = item.rpartition("@")
        if not at or not key:
            checks.problem(f"bound_offsets item {item!r} must be brokerId:topic:partitionId@offset")
            continue
        if key.strip() in offsets:
            checks.problem(f"bound_offsets names {key.strip()!r} twice")
        offsets[key.strip()] = _int(checks, "bound_offsets", offset)
    return offsets


@dataclass(frozen=True, slots=True)
class BoundParts:
    """Bound-consumption settings read from a URL; the consumer config turns them into a
    :class:`~tubemq_aio.consumer.bound.BoundConsume` (which lives a layer above)."""

    session_key: str
    source_count: int
    select_big: bool
    offsets: dict[str, int]


class _Collected:
    """What the special keys of one URL add up to."""

    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}
        self.topics: list[str] = []
        self.filters: dict[str, list[str]] = {}
        self.bound: dict[str, Any] = {}
        self.tls: dict[str, str] = {}
        #: what asked for TLS or against it: ``("tubemqs://", True)``, ``("tls=false", False)``
        self.tls_wishes: list[tuple[str, bool]] = []
        self.auth: dict[str, str] = {}
        self.auth_enable: bool | None = None


def translate_query(
    checks: Checks,
    pairs: Iterable[tuple[str, str]],
    names: frozenset[str],
    *,
    tls_scheme: bool = False,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Take the keys this module knows out of ``pairs``.

    TLS is on when the scheme, ``tls``, ``tlsEnable`` or a TLS file asks for it: with the
    files' context when files are given, else ``ssl.create_default_context()``. A URL that
    both asks for it and refuses it (``tubemqs://…?tls=false``) is a problem, as is a second
    ``tls`` key.

    Args:
        checks: where problems are recorded (named, never raised here).
        pairs: the URL's ``key=value`` pairs in order (values unquoted).
        names: the config's field names; a key whose field the config lacks is left over
            (and then refused as unknown).
        tls_scheme: whether the URL's scheme is ``tubemqs``.

    Returns:
        The keyword arguments they make, and the pairs left for the field-name loop.
    """
    got = _Collected()
    if tls_scheme:
        got.tls_wishes.append(("tubemqs://", True))
    rest: list[tuple[str, str]] = []
    for key, value in pairs:
        if not _take(checks, got, key, value, names):
            rest.append((key, value))
    _finish(checks, got, names)
    return got.kwargs, rest


def _take(checks: Checks, got: _Collected, key: str, value: str, names: frozenset[str]) -> bool:
    """Record one pair; False when it is not a special key for this config."""
    if key in IGNORED_GO_KEYS:
        return True
    if key in GO_KEYS and GO_KEYS[key][0] in names:
        field, kind = GO_KEYS[key]
        if kind == "ms":
            got.kwargs[field] = _int(checks, key, value) / 1000
        elif kind == "int":
            got.kwargs[field] = _int(checks, key, value)
        else:
            got.kwargs[field] = value
        return True
    if "topics" not in names and key in ("topic", "topics"):
        return False
    if key == "topic":
        got.topics.append(value)
    elif key == "topics":
        got.topics.extend(v for v in value.split(","))
    elif key == "filters" and "group" in names:
        if not got.topics:
            checks.problem(f"URL filters {value!r} must follow the topic they filter")
        else:
            got.filters.setdefault(got.topics[-1], []).extend(value.split(","))
    elif key.startswith("filter.") and "group" in names:
        got.filters.setdefault(key.removeprefix("filter."), []).extend(value.split(","))
    elif key == "consumePosition" and "consume_from" in names:
        if value.strip() not in _GO_POSITIONS:
            checks.problem(f"consumePosition must be -1, 0 or 1, got {value!r}")
        got.kwargs["consume_from"] = _GO_POSITIONS.get(value.strip(), value)
    elif "bound" in names and key in _BOUND_KEYS:
        if key in got.bound:
            checks.problem(f"option {key!r} given twice in URL")
        got.bound[key] = value
    elif key in ("tls", "tlsEnable"):
        if any(wish.startswith(f"{key}=") for wish, _ in got.tls_wishes):
            checks.problem(f"option {key!r} given twice in URL")
        got.tls_wishes.append((f"{key}={value}", _flag(checks, key, value)))
    elif key in _TLS_FILES:
        got.tls[_TLS_FILES[key]] = value
        got.tls_wishes.append((key, True))
    elif key == "authEnable":
        got.auth_enable = _flag(checks, key, value)
    elif key in ("authUserName", "authPassword"):
        got.auth[key] = value
    elif key == "rollbackIfConfirmTimeout":
        if not _flag(checks, key, value):
            checks.problem(
                "rollbackIfConfirmTimeout=false is not supported: a batch not "
                "acked in time is always delivered again"
            )
    else:
        return False
    return True


def _finish(checks: Checks, got: _Collected, names: frozenset[str]) -> None:
    """Turn the collected parts into keyword arguments."""
    if got.topics or got.filters:
        if got.filters and "group" in names:
            topics: dict[str, list[str] | None] = dict.fromkeys(got.topics)
            for topic, filters in got.filters.items():
                if topic not in topics:
                    checks.problem(f"URL filters for {topic!r}, a topic not subscribed")
                topics[topic] = filters
            got.kwargs["topics"] = topics
        else:
            got.kwargs["topics"] = got.topics
    if got.bound:
        _finish_bound(checks, got)
    wishes = {wish for _, wish in got.tls_wishes}
    if len(wishes) > 1:
        said = ", ".join(what for what, _ in got.tls_wishes)
        checks.problem(f"URL both asks for TLS and refuses it ({said})")
    elif got.tls:
        got.kwargs["ssl_context"] = _tls_context(checks, got.tls)
    elif True in wishes:
        got.kwargs["ssl_context"] = ssl.create_default_context()
    if got.auth_enable or (got.auth and got.auth_enable is None):
        user, password = got.auth.get("authUserName", ""), got.auth.get("authPassword", "")
        if not user or not password:
            checks.problem("authUserName and authPassword are both needed for authentication")
        else:
            got.kwargs["credentials"] = Credentials(user, password)


def _finish_bound(checks: Checks, got: _Collected) -> None:
    b = got.bound
    if "boundConsume" in b and not _flag(checks, "boundConsume", b["boundConsume"]):
        return
    for go, ours in _BOUND_SYNONYMS:
        if go in b and ours in b:
            checks.problem(f"options {go!r} and {ours!r} both given in URL (the same option)")
    key = b.get("sessionKey", b.get("bound_session_key"))
    count = b.get("sourceCount", b.get("bound_source_count"))
    if key is None or count is None:
        checks.problem(
            "bound consumption needs a session key and a source count "
            "(bound_session_key and bound_source_count)"
        )
        return
    select = b.get("selectBig", b.get("bound_select_big", "true"))
    got.kwargs["bound"] = BoundParts(
        session_key=key,
        source_count=_int(checks, "bound_source_count", count),
        select_big=_flag(checks, "bound_select_big", select),
        offsets=_bound_offsets(checks, b["bound_offsets"]) if "bound_offsets" in b else {},
    )


def _tls_context(checks: Checks, files: dict[str, str]) -> ssl.SSLContext | None:
    """A verifying context from ``cacertfile`` / ``certfile`` / ``keyfile`` paths."""
    try:
        return TlsFiles(files.get("ca"), files.get("cert"), files.get("key")).context()
    except ConfigError as exc:
        checks.problem(str(exc))
        return None
