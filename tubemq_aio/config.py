"""Client configuration: frozen, keyword-only dataclasses validated once at construction.

Every client takes a master address list plus keyword options; :meth:`ClientConfig.from_url`
builds the same from ``tubemq://host1:8715,host2:8715?rpc_timeout=5&tls=true``. Defaults follow the
official Java client where it has one (docs/protocol/wire.md §2.5, §4.8, §7.1).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import ssl
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self, TypedDict, Unpack
from urllib.parse import parse_qsl, unquote, urlsplit

from tubemq_aio._url_keys import translate_query
from tubemq_aio.auth import Credentials
from tubemq_aio.checks import (
    Checks,
    check_options,
    integer_of_text,
    is_seconds,
    number_of_text,
    shown,
)
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.framing import BLOCK_SIZE, DEFAULT_MAX_FRAME_BYTES
from tubemq_aio.protocol.legacy_framing import FRAMINGS, Framing
from tubemq_aio.telemetry import Telemetry

__all__ = [
    "MAX_HOST_NAME_LENGTH",
    "ClientConfig",
    "ClientOptions",
    "Credentials",
    "HostPort",
    "host_problem",
    "is_loopback_host",
    "parse_host_port",
    "parse_masters",
    "redact_url",
]

#: Default TubeMQ master RPC port.
DEFAULT_MASTER_PORT = 8715


@dataclass(frozen=True, slots=True)
class HostPort:
    """A ``host:port`` network address; an IPv6 literal is kept without brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_host_port(text: str, *, default_port: int | None = None) -> HostPort:
    """Parse ``host:port``, ``[ipv6]:port`` (or ``host``, ``[ipv6]``, a bare IPv6 literal when
    ``default_port`` is given).

    Raises:
        ConfigError: the text is not a valid address.
    """
    checks = Checks("address")
    if not isinstance(text, str):
        checks.fail(f"address must be a string, got {type(text).__name__}")
    text = text.strip()
    if "@" in text:  # user info: the text may hold a password, so it is not echoed
        checks.fail(
            "address must not contain user info (user:password@); pass credentials= or "
            "use ClientConfig.from_url('tubemq://user:password@host:port')"
        )
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")) or not _is_ipv6(host):
            checks.fail(f"address {shown(text)} is not a valid [IPv6]:port")
        port_text = rest[1:]
        if rest == ":":
            checks.fail(f"address {shown(text)} has no port")
    elif any(c.isspace() or c == ";" for c in text):
        checks.fail(f"address {shown(text)} holds a space or ';': separate addresses with ','")
    elif text.count(":") > 1:
        if not _is_ipv6(text):
            checks.fail(f"address {shown(text)}: write an IPv6 address with a port as [ip]:port")
        host, port_text = text, ""
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            host, port_text = text, ""
        elif not port_text:
            checks.fail(f"address {shown(text)} has no port")
    if not host or any(c.isspace() or c in "/[]" for c in host):
        checks.fail(f"address {shown(text)} has no valid host")
    problem = host_problem(host)
    if problem is not None:
        checks.fail(f"address {shown(text)}: host {problem}")
    if not port_text:
        if default_port is None:
            checks.fail(f"address {shown(text)} has no port")
        return HostPort(host, default_port)
    if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 10:
        checks.fail(f"address {shown(text)} has an invalid port")
    checks.integer(f"address {shown(text)}: port", int(port_text), low=1, high=65535)
    checks.done()
    return HostPort(host, int(port_text))


#: The longest host name a resolver takes, in characters of its ASCII (IDNA) form (RFC 1035
#: §2.3.4: 255 bytes on the wire, 253 written out; a trailing dot not counted).
MAX_HOST_NAME_LENGTH = 253

_DOTTED_QUAD = re.compile(r"[0-9]+(\.[0-9]+){3}", re.ASCII)
_HOST_NAME = re.compile(r"[\w.-]+")


def host_problem(host: str) -> str | None:
    """Why ``host`` can name no machine to connect to, in words, or None when it can.

    An IP address (an IPv6 one without brackets, a zone such as ``%eth0`` allowed) or a host
    name: dot-separated labels of letters (any script: IDNA), digits, ``-`` and ``_`` (names
    such as ``broker_1`` resolve through ``/etc/hosts`` and container networks), each of 1
    to 63 characters in its ASCII form and at most 253 in all, a trailing dot allowed. Refused
    here rather than at the first connect, where the resolver fails on them (a label over 63
    characters even with a ``UnicodeError``, not an ``OSError``).

    Args:
        host: the host as :class:`HostPort` keeps it.
    """
    if _is_ipv6(host):
        return None
    if _DOTTED_QUAD.fullmatch(host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{shown(host)} is not a valid IPv4 address"
        return None
    if not _HOST_NAME.fullmatch(host):
        return f"{shown(host)} holds a character no host name has (letters, digits, '-', '_', '.')"
    try:
        ascii_name = host.encode("idna")
    except UnicodeError:
        return f"{shown(host)} has an empty label or one over 63 characters"
    if len(ascii_name.rstrip(b".")) > MAX_HOST_NAME_LENGTH:
        return f"name of {len(ascii_name)} characters is over {MAX_HOST_NAME_LENGTH}"
    return None


def _checked_host_port(address: HostPort) -> HostPort:
    """``address`` once its fields are checked as :func:`parse_host_port` checks text (a
    :class:`HostPort` is built without a check: the client makes them from server answers)."""
    checks = Checks("address")
    host, port = address.host, address.port
    if not isinstance(host, str):
        checks.fail(f"address {shown(address)}: host must be a string, got {type(host).__name__}")
    problem = host_problem(host)
    if problem is not None:
        checks.problem(f"address {shown(address)}: host {problem}")
    checks.integer(f"address {shown(address)}: port", port, low=1, high=65535)
    checks.done()
    return address


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface: an IPv4 address in
    127.0.0.0/8, the IPv6 ``::1`` (any spelling, also IPv4-mapped ``::ffff:127.x.y.z``), or the
    name ``localhost`` (any case, a trailing dot allowed). Other names are not resolved.

    Args:
        host: a host as :class:`HostPort` keeps it (an IPv6 literal without brackets).
    """
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def parse_masters(
    masters: str | HostPort | typing.Iterable[str | HostPort],
) -> tuple[HostPort, ...]:
    """Parse a master list: ``"h1:8715,h2:8715"``, an iterable of ``host:port`` strings, or
    :class:`HostPort` values.

    Duplicates are dropped (the Java client does the same); order is kept. A blank entry
    beside others (``"h1:8715,,h2:8715"``, ``"h1:8715,"``) is refused, as Java refuses it: it
    is most often an address left out.

    Raises:
        ConfigError: the list is empty, not a string or collection, has a blank entry, or an
            address is invalid (its host as :func:`host_problem` says, its port outside
            1-65535).
    """
    checks = Checks("masters")
    items: list[object] = []
    if isinstance(masters, HostPort):
        items = [masters]
    elif isinstance(masters, str):
        items = list(masters.split(","))
    elif isinstance(masters, set | frozenset):
        checks.fail("masters must be a list or a tuple, not a set: masters are tried in order")
    elif isinstance(masters, bytes | bytearray | typing.Mapping) or not isinstance(
        masters, typing.Iterable
    ):
        checks.fail(
            f"masters must be 'host:port,...' or a list of addresses, got {type(masters).__name__}"
        )
    else:
        items = list(masters)
    result: list[HostPort] = []
    blank = [i + 1 for i, item in enumerate(items) if isinstance(item, str) and not item.strip()]
    if blank and len(blank) < len(items):  # all blank: "at least one ... is required" below
        checks.problem(
            f"entry {', '.join(map(str, blank))} of {len(items)} is blank (an address left "
            "out, such as an unset variable?)"
        )
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            address = (
                _checked_host_port(item)
                if isinstance(item, HostPort)
                else parse_host_port(item, default_port=DEFAULT_MASTER_PORT)  # type: ignore[arg-type]
            )
        except ConfigError as exc:  # every bad address is named, not only the first
            checks.adopt(exc)
            continue
        if address not in result:
            result.append(address)
    if not result and checks.ok:
        checks.problem("at least one master address is required")
    checks.done()
    return tuple(result)


def _check_host(c: Checks, name: str, value: object) -> None:
    """``value`` is None or a host as :func:`host_problem` takes it (kept as given)."""
    host = c.text(name, value, optional=True)
    problem = None if not host else host_problem(host)
    if problem is not None:
        c.problem(f"{name}: host {problem}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Options shared by producers and consumers.

    Attributes:
        masters: master addresses, tried in order on failure (standby master, connection loss).
        rpc_timeout: seconds to wait for a server answer; also sent as the server-side deadline.
            The Java client's default is 10 s, clamped to 3–600 s.
        connect_timeout: seconds allowed for a TCP/TLS connect (Java: 3 s).
        heartbeat_interval: seconds between master heartbeats (Java: 13 s).
        ssl_context: an ``ssl.SSLContext`` to use TLS; then list the masters' TLS ports. Every
            master's and broker's certificate is verified against the host the client connects
            to (with ``ssl.create_default_context()``, the default of ``tubemqs://`` and
            ``?tls=true``). A context with ``check_hostname = False`` opts out of the host name
            check: insecure, any certificate the context trusts is accepted for every peer.
        tls_server_hostname: one host name to check for every peer instead of each peer's own
            (certificates that all carry one shared name); ``None`` checks each peer's host.
        credentials: user name and password when the cluster authenticates clients.
        connection_reuse: share TCP connections with other clients in this event loop (the Java
            ``TubeSingleSessionFactory``); ``False`` gives this client connections of its own.
        idle_timeout: seconds without traffic after which a pooled connection is closed.
        max_in_flight: requests outstanding on one connection before callers wait.
        write_high_water: bytes a connection's write buffer may hold before its senders wait
            for it to drain (the transport's ``pause_writing``; default 1 MiB, at most 1 GiB);
            requests written within one event-loop turn also leave at once when they reach it.
            A larger value lets a fast producer queue more while the kernel's socket buffer is
            full, at the cost of memory per connection.
        write_low_water: bytes the write buffer must drain down to before waiting senders
            resume, at most ``write_high_water``; ``None`` (default) = a quarter of it
            (256 KiB with the default high-water mark).
        max_frame_bytes: the largest answer payload one frame may carry, in bytes (default
            28 MiB = 3584 blocks of 8 KiB, the Java limit and the most a TubeMQ server sends;
            at least one 8 KiB block). A frame declaring more is refused as soon as its header
            says so: the calls waiting on that connection fail with
            :class:`~tubemq_aio.errors.FrameError` ("frame payload exceeds the N-byte cap
            (max_frame_bytes)") and the connection is closed. Lower it to bound the memory one
            answer may take (a consumer's fetch answer is the largest).
        sweep_interval: seconds between two passes of the deadline sweeper, which ends the
            calls whose time is up (default 0.05 s, in [0.001, 1] s): a call's timeout fires
            at most this late. Smaller is more exact and wakes the loop more often.
        read_coalescing: the share of a connection's answers still owed that one socket read
            may wait for (default 1/32, in [0, 0.25]; 0 = off). While many requests are in
            flight on a connection (a producer's window of sends), the socket is told
            (``SO_RCVLOWAT``) to wake the client only once about this share of them has
            answered, so one read and one turn of the event loop serve several answers: fewer
            system calls and less CPU per call, for about this share more latency (answers
            owed = rate × latency, so waiting for 1/32 of them is about 1/32 of a call's
            latency). It is off while that share is under two answers (under 64 owed at the
            default); a call whose answer sits unread when its
            deadline passes gets it first (the sweeper lowers the mark and looks again one
            ``sweep_interval`` later). Where the platform has no ``SO_RCVLOWAT`` it is off.
            Larger shares have also cost throughput against a real broker (1/4 down to a
            third of the default's messages a second at a full window of 256 on two cores;
            ``docs/benchmarks.md``, "The larger shares again").
        connection_close_timeout: seconds a connection being closed (by ``close()``, the
            idle reaper) waits for its queued bytes to leave before it is aborted (default
            1 s, in (0, 60] s).
        connect_backoff_initial: seconds a failed connect to an address keeps further
            connects to it away (default 0.1 s, in (0, 60] s); calls to it meanwhile fail
            at once with the connect error.
        connect_backoff_max: the longest such pause, in seconds (default 10 s, in
            [``connect_backoff_initial``, 600] s).
        connect_backoff_multiplier: how much the pause grows per consecutive failed connect
            to one address (default 2.0, in [1, 100]; 1 keeps it constant).
        connect_backoff_jitter: the fraction of each pause drawn at random, so clients that
            lost a node together do not come back together (default 0.2, in [0, 1]).
        client_host: the local address reported to the master as this client's host
            (default: the address of the socket that reaches the master); an IPv4 address
            or a host name, never an IPv6 address (ids and metadata use ``:`` as a separator)
            nor a name with ``_`` (a broker splits a consumer id at its last ``_``).
        telemetry: OpenTelemetry spans and metrics: ``None`` = on when ``opentelemetry-api``
            is installed, ``True`` = required, ``False`` = off, or a
            :class:`~tubemq_aio.telemetry.Telemetry` naming providers (docs/observability.md).
        framing: how frames are delimited: ``"standard"`` (default), or ``"legacy-length"`` for
            TubeMQ servers 1.1.0 and 1.2.0, whose RPC layer puts a 4-byte length before every
            frame and refuses frames over 5 MiB (docs/protocol/wire.md §1.7). A server of the
            other kind drops the connection unanswered; the error then says which to try.
        stats_log_interval: seconds between two statistics lines in the log (logger
            ``tubemq_aio.stats``, INFO): every counter and its change (Java ``StatsConfig``
            self-printing, which is on by default every 6 min); ``None`` (default) = off.
    """

    masters: tuple[HostPort, ...]
    rpc_timeout: float = 10.0
    connect_timeout: float = 3.0
    heartbeat_interval: float = 13.0
    ssl_context: ssl.SSLContext | None = None
    tls_server_hostname: str | None = None
    credentials: Credentials | None = None
    connection_reuse: bool = True
    idle_timeout: float = 180.0
    max_in_flight: int = 1024
    write_high_water: int = 1024 * 1024
    write_low_water: int | None = None
    max_frame_bytes: int = 28 * 1024 * 1024  # DEFAULT_MAX_FRAME_BYTES, as a value for the docs
    sweep_interval: float = 0.05
    read_coalescing: float = 1 / 32
    connection_close_timeout: float = 1.0
    connect_backoff_initial: float = 0.1
    connect_backoff_max: float = 10.0
    connect_backoff_multiplier: float = 2.0
    connect_backoff_jitter: float = 0.2
    client_host: str | None = None
    telemetry: bool | Telemetry | None = None
    framing: Framing = "standard"
    stats_log_interval: float | None = None

    def __post_init__(self) -> None:
        checks = Checks(type(self).__name__)
        self._check(checks)
        checks.done()

    def _check(self, c: Checks) -> None:
        """Validate and normalise every field, recording problems in ``c`` (subclasses extend
        this and call it first)."""
        try:
            object.__setattr__(self, "masters", parse_masters(self.masters))
        except ConfigError as exc:
            c.adopt(exc)
        c.seconds("rpc_timeout", self.rpc_timeout, low=3.0, high=600.0, low_open=False)
        c.seconds("connect_timeout", self.connect_timeout, high=120.0)
        c.seconds(
            "heartbeat_interval", self.heartbeat_interval, low=1.0, high=300.0, low_open=False
        )
        c.instance("ssl_context", self.ssl_context, ssl.SSLContext, optional=True)
        _check_host(c, "tls_server_hostname", self.tls_server_hostname)
        c.instance("credentials", self.credentials, Credentials, optional=True)
        c.flag("connection_reuse", self.connection_reuse)
        c.seconds("idle_timeout", self.idle_timeout)
        c.integer("max_in_flight", self.max_in_flight, low=1, high=1 << 20)
        c.integer("write_high_water", self.write_high_water, low=1, high=1 << 30)
        high = self.write_high_water if type(self.write_high_water) is int else None
        if self.write_low_water is not None:
            c.integer("write_low_water", self.write_low_water, low=0, high=high)
        c.integer(
            "max_frame_bytes", self.max_frame_bytes, low=BLOCK_SIZE, high=DEFAULT_MAX_FRAME_BYTES
        )
        c.seconds("sweep_interval", self.sweep_interval, low=0.001, high=1.0, low_open=False)
        c.number("read_coalescing", self.read_coalescing, low=0.0, high=0.25)
        c.seconds("connection_close_timeout", self.connection_close_timeout, high=60.0)
        initial, maximum = self.connect_backoff_initial, self.connect_backoff_max
        c.seconds("connect_backoff_initial", initial, high=60.0)
        c.seconds("connect_backoff_max", maximum, high=600.0)
        if is_seconds(initial, 60.0) and is_seconds(maximum, 600.0) and maximum < initial:
            c.problem("connect_backoff_max must not be smaller than connect_backoff_initial")
        c.number("connect_backoff_multiplier", self.connect_backoff_multiplier, low=1.0, high=100.0)
        c.number("connect_backoff_jitter", self.connect_backoff_jitter, low=0.0, high=1.0)
        _check_host(c, "client_host", self.client_host)
        if isinstance(self.client_host, str) and _is_ipv6(self.client_host.strip()):
            c.problem(
                f"client_host {shown(self.client_host)} is an IPv6 address: TubeMQ client ids "
                "and metadata use ':' as a separator; give an IPv4 address of this machine"
            )
        elif isinstance(self.client_host, str) and "_" in self.client_host:
            c.problem(  # docs/protocol/consumer.md §1.2 field 1
                f"client_host {shown(self.client_host)} holds '_': a broker reads the client "
                "id's last '_' as the end of the group; give an IPv4 address of this machine"
            )
        c.instance("telemetry", self.telemetry, (bool, Telemetry), optional=True)
        c.choice("framing", self.framing, FRAMINGS)
        c.optional_seconds("stats_log_interval", self.stats_log_interval, high=86_400.0)

    @classmethod
    def from_url(cls, url: str, **overrides: Unpack[ClientOptions]) -> Self:
        """Build a config from ``tubemq://h1:p1,h2:p2?option=value&...``.

        Query options are the dataclass field names; values are converted to the field's type
        (``true``/``false`` for booleans). ``tls=true`` selects a default ``SSLContext``.
        ``tubemq://user:password@host:8715`` sets :attr:`credentials` (percent-encode ``:``,
        ``@`` and ``/`` in either part); the password never appears in a repr or an error text.
        IPv6 masters are written ``[::1]:8715``. Keyword ``overrides`` win over the URL.
        The Go client's keys (and its scheme-less ``host:port?key=value`` address) are
        accepted too, as are keys for the options that are not one value (topics with
        filters, bound consumption, TLS files): ``docs/api.md``, "Options in a URL", lists
        them.

        Raises:
            ConfigError: the URL, an option name or an option value is invalid.
        """
        return cls._from_url(url, overrides)

    @classmethod
    def _from_url(cls, url: str, overrides: Mapping[str, Any]) -> Self:
        """:meth:`from_url` for every subclass (each types its own keywords)."""
        check_options(cls, overrides, what=f"{cls.__name__}.from_url")
        checks = Checks("URL")
        if not isinstance(url, str):
            checks.fail(f"the URL must be a string, got {type(url).__name__}")
        url = url.strip()
        if "://" not in url and "?" in url:  # a Go client address: masters?key=value&...
            url = "tubemq://" + url
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # e.g. an unbalanced '[' in the host part
            checks.fail(f"invalid URL {redact_url(url)!r}: {exc}")
        if parts.scheme not in ("tubemq", "tubemqs"):
            checks.problem(
                f"URL scheme must be tubemq:// (or tubemqs:// for TLS), got {redact_url(url)!r}"
            )
        if parts.path not in ("", "/") or parts.fragment:
            checks.problem(f"URL {redact_url(url)!r} must not have a path or a fragment")
        if "@" not in parts.netloc and _user_info_end(url.partition("://")[2]) >= 0:
            checks.fail(  # the rest of the URL holds part of the password: nothing more is said
                f"URL {redact_url(url)!r}: percent-encode '/', '?', '#', '@' and ':' in the user "
                "name and password (a '/' as %2F, a '#' as %23)"
            )
        user_info, at, hosts = parts.netloc.rpartition("@")
        kwargs: dict[str, Any] = {"masters": unquote(hosts)}
        if at:
            kwargs["credentials"] = _credentials_of(checks, user_info)
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        special, pairs = translate_query(
            checks,
            parse_qsl(parts.query, keep_blank_values=True),
            frozenset(names),
            tls_scheme=parts.scheme == "tubemqs",
        )
        for key in sorted(special.keys() & kwargs.keys()):  # credentials: user info and Go keys
            checks.problem(f"option {key!r} given twice in URL (or also as a Go key)")
        kwargs.update(cls._from_url_parts(checks, special))
        seen: set[str] = set(kwargs)  # the options the URL's other parts gave
        for key, value in pairs:
            if key in seen:  # which of the two was meant is unknowable: neither is taken
                checks.problem(f"option {key!r} given twice in URL (or also as a Go key)")
                continue
            seen.add(key)
            if key not in names or key in ("masters", "ssl_context", "credentials"):
                checks.problem(f"unknown option {key!r} in URL")
            else:
                kwargs[key] = _convert(checks, key, value, hints[key])
        kwargs.update(overrides)
        for field in dataclasses.fields(cls):  # e.g. a consumer's group, in neither place
            required = field.default is field.default_factory is dataclasses.MISSING
            if required and field.name not in kwargs:
                checks.problem(
                    f"option {field.name!r} is required: give it in the URL or as a keyword"
                )
        checks.done()
        return cls(**kwargs)

    @classmethod
    def _from_url_parts(cls, checks: Checks, parts: dict[str, Any]) -> dict[str, Any]:
        """Turn what :func:`~tubemq_aio._url_keys.translate_query` read into field values
        (a subclass converts the values of its own layer)."""
        return parts


class ClientOptions(TypedDict, total=False):
    """The :class:`ClientConfig` fields a client takes as keyword arguments (all optional).

    Types for the checker only: the values are validated by the config at construction, and
    an unknown keyword raises :class:`~tubemq_aio.errors.ConfigError`.
    """

    rpc_timeout: float
    connect_timeout: float
    heartbeat_interval: float
    ssl_context: ssl.SSLContext | None
    tls_server_hostname: str | None
    credentials: Credentials | None
    connection_reuse: bool
    idle_timeout: float
    max_in_flight: int
    write_high_water: int
    write_low_water: int | None
    max_frame_bytes: int
    sweep_interval: float
    read_coalescing: float
    connection_close_timeout: float
    connect_backoff_initial: float
    connect_backoff_max: float
    connect_backoff_multiplier: float
    connect_backoff_jitter: float
    client_host: str | None
    telemetry: bool | Telemetry | None
    framing: Framing
    stats_log_interval: float | None


def redact_url(url: str) -> str:
    """``url`` with any user info before the host replaced by ``***`` (safe to log or show).

    The user info ends at the last ``@`` that is not in a query value (``bound_offsets=1:t:0@5``
    keeps its ``@``), so a password with an unencoded ``/``, ``?`` or ``#`` is hidden too.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url if "@" not in url else "***@" + url.rpartition("@")[2]
    end = _user_info_end(rest)
    return f"{scheme}://{rest if end < 0 else '***' + rest[end:]}"


def _user_info_end(rest: str) -> int:
    """Where the user info of ``rest`` (a URL after ``://``) ends: the index of its last ``@``
    not inside a query value (after a ``?`` and an ``=``), or -1 without one."""
    query = rest.find("?")
    for at in range(len(rest) - 1, -1, -1):
        if rest[at] == "@" and (query < 0 or at < query or "=" not in rest[query:at]):
            return at
    return -1


def _credentials_of(checks: Checks, user_info: str) -> Credentials | None:
    """``user:password`` (percent-encoded) from a URL; the texts never reach an error."""
    user, colon, password = user_info.partition(":")
    if not colon or not user or not password:
        checks.problem("URL user info must be user:password (percent-encode ':', '@', '/')")
        return None
    return Credentials(unquote(user), unquote(password))


def _to_bool(checks: Checks, name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered not in ("0", "false", "no", "off"):
        checks.problem(f"option {name!r} needs true or false, got {shown(value)}")
    return False


def _convert(checks: Checks, name: str, value: str, hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value == "" and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        return _to_bool(checks, name, value)
    if typing.get_origin(hint) is tuple:
        return tuple(v for v in value.split(",") if v)
    if typing.get_origin(hint) is typing.Literal:
        return value  # the config's own check names the allowed values
    if hint is str:
        return value
    if hint not in (int, float):
        checks.problem(f"option {name!r} cannot be set from a URL")
        return None
    number = integer_of_text(value) if hint is int else number_of_text(value)
    if number is None:
        checks.problem(f"option {name!r} has an invalid value {shown(value)}")
    return number
