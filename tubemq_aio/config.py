"""Client configuration: frozen, keyword-only dataclasses validated once at construction.

Every client takes a master address list plus keyword options; :meth:`ClientConfig.from_url`
builds the same from ``tubemq://host1:8715,host2:8715?rpc_timeout=5&tls=true``. Defaults follow the
official Java client where it has one (shared protocol notes §2.5, §4.8, §7.1).
"""

from __future__ import annotations

import dataclasses
import ssl
import types
import typing
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from tubemq_aio.auth import Credentials
from tubemq_aio.errors import ConfigError

__all__ = ["ClientConfig", "Credentials", "HostPort", "parse_host_port", "parse_masters"]

#: Default TubeMQ master RPC port.
DEFAULT_MASTER_PORT = 8715


@dataclass(frozen=True, slots=True)
class HostPort:
    """A ``host:port`` network address."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_host_port(text: str, *, default_port: int | None = None) -> HostPort:
    """Parse ``host:port`` (or ``host`` when ``default_port`` is given).

    Raises:
        ConfigError: the text is not a valid address.
    """
    text = text.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, ""
    if not host:
        raise ConfigError(f"address {text!r} has no host")
    if not port_text:
        if default_port is None:
            raise ConfigError(f"address {text!r} has no port")
        return HostPort(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"address {text!r} has an invalid port")
    return HostPort(host, int(port_text))


def parse_masters(masters: str | typing.Iterable[str]) -> tuple[HostPort, ...]:
    """Parse a master list: ``"h1:8715,h2:8715"`` or an iterable of ``host:port`` strings.

    Duplicates are dropped (the Java client does the same); order is kept.

    Raises:
        ConfigError: the list is empty or an address is invalid.
    """
    items = masters.split(",") if isinstance(masters, str) else list(masters)
    result: list[HostPort] = []
    for item in items:
        if not item.strip():
            continue
        address = parse_host_port(item, default_port=DEFAULT_MASTER_PORT)
        if address not in result:
            result.append(address)
    if not result:
        raise ConfigError("at least one master address is required")
    return tuple(result)


def _require(condition: bool, name: str, rule: str) -> None:
    if not condition:
        raise ConfigError(f"{name} must be {rule}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Options shared by producers and consumers.

    Attributes:
        masters: master addresses, tried in order on failure (standby master, connection loss).
        rpc_timeout: seconds to wait for a server answer; also sent as the server-side deadline.
            The Java client's default is 10 s, clamped to 3–600 s.
        connect_timeout: seconds allowed for a TCP/TLS connect (Java: 3 s).
        heartbeat_interval: seconds between master heartbeats (Java: 13 s).
        ssl_context: an ``ssl.SSLContext`` to use TLS; then list the masters' TLS ports.
        tls_server_hostname: host name to check on TLS; ``None`` checks nothing beyond the chain,
            like the Java client (its engine has no endpoint identification).
        credentials: user name and password when the cluster authenticates clients.
        connection_reuse: share TCP connections with other clients in this event loop (the Java
            ``TubeSingleSessionFactory``); ``False`` gives this client connections of its own.
        idle_timeout: seconds without traffic after which a pooled connection is closed.
        max_in_flight: requests outstanding on one connection before callers wait.
        client_host: the local address reported to the master as this client's host
            (default: the address of the socket that reaches the master).
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
    client_host: str | None = None

    def __post_init__(self) -> None:
        masters: Any = self.masters
        if isinstance(masters, str) or not all(isinstance(m, HostPort) for m in masters):
            object.__setattr__(self, "masters", parse_masters(masters))
        _require(3.0 <= self.rpc_timeout <= 600.0, "rpc_timeout", "between 3 and 600 seconds")
        _require(0 < self.connect_timeout <= 120.0, "connect_timeout", "in (0, 120] seconds")
        _require(1.0 <= self.heartbeat_interval <= 300.0, "heartbeat_interval", "in [1, 300] s")
        _require(self.idle_timeout > 0, "idle_timeout", "positive")
        _require(self.max_in_flight >= 1, "max_in_flight", "at least 1")

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> Self:
        """Build a config from ``tubemq://h1:p1,h2:p2?option=value&...``.

        Query options are the dataclass field names; values are converted to the field's type
        (``true``/``false`` for booleans). ``tls=true`` selects a default ``SSLContext``.
        Keyword ``overrides`` win over the URL.

        Raises:
            ConfigError: the URL, an option name or an option value is invalid.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("tubemq", "tubemqs"):
            raise ConfigError(f"URL scheme must be tubemq:// (or tubemqs:// for TLS), got {url!r}")
        kwargs: dict[str, Any] = {"masters": unquote(parts.netloc)}
        if parts.scheme == "tubemqs":
            kwargs["ssl_context"] = ssl.create_default_context()
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key == "tls":
                if _to_bool(key, value):
                    kwargs["ssl_context"] = ssl.create_default_context()
                continue
            if key not in names or key in ("masters", "ssl_context", "credentials"):
                raise ConfigError(f"unknown option {key!r} in URL")
            kwargs[key] = _convert(key, value, hints[key])
        kwargs.update(overrides)
        return cls(**kwargs)


def _to_bool(name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"option {name!r} needs true or false, got {value!r}")


def _convert(name: str, value: str, hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value == "" and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    try:
        if hint is bool:
            return _to_bool(name, value)
        if hint in (int, float, str):
            return hint(value)
        if typing.get_origin(hint) is tuple:
            return tuple(v for v in value.split(",") if v)
    except ValueError as exc:
        raise ConfigError(f"option {name!r} has an invalid value {value!r}") from exc
    raise ConfigError(f"option {name!r} cannot be set from a URL")
