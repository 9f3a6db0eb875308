"""TLS and the sentinels' credentials of the gateway's ``redis`` URL (its query options).

The single-server form hands its query to redis-py as it is (``rediss://h:6380/0?ssl_ca_certs=…``
is redis-py's own form); the Sentinel and Cluster forms take the same TLS options and the
sentinels' credentials, read here:

========================  =========================================================  ==========
option                    meaning                                                    forms
========================  =========================================================  ==========
``ssl_ca_certs``          PEM file of the CAs that signed the nodes' certificates    ``rediss+``
``ssl_certfile``          PEM certificate the gateway shows (mutual TLS)             ``rediss+``
``ssl_keyfile``           its private key (needs ``ssl_certfile``)                   ``rediss+``
``ssl_cert_reqs``         ``required`` (default), ``optional`` or ``none``           ``rediss+``
``ssl_check_hostname``    ``true`` (default) or ``false``                            ``rediss+``
``sentinel_username``     the sentinels' ACL user                                    sentinel
``sentinel_password``     the sentinels' password (the URL's credentials are the     sentinel
                          data nodes')
========================  =========================================================  ==========

A ``[redis]`` table may give any of them as keys of its own (:func:`fold_into_url` puts them in
the URL's query), so a password need not be written into the URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from tubemq_aio.errors import ConfigError

__all__ = ["URL_OPTIONS", "HaOptions", "RedisTls", "fold_into_url", "parse_ha_options"]

_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
_TLS_OPTIONS = (*_TLS_FILES, "ssl_cert_reqs", "ssl_check_hostname")
_SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
#: Every query option this module reads (also the ``[redis]`` table keys folded into the URL).
URL_OPTIONS = (*_TLS_OPTIONS, *_SENTINEL_OPTIONS)
_CERT_REQS = ("required", "optional", "none")
_BOOLS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass(frozen=True, slots=True)
class RedisTls:
    """TLS to every node of a Sentinel or Cluster store (sentinels included).

    Attributes:
        ca_certs: PEM file of the trusted CAs (None: the system's).
        certfile: the gateway's certificate for mutual TLS, or None.
        keyfile: its private key, or None.
        cert_reqs: ``required``, ``optional`` or ``none`` (no check of the node's certificate).
        check_hostname: whether the node's certificate must name the host connected to.
    """

    ca_certs: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    cert_reqs: str = "required"
    check_hostname: bool = True

    def client_kwargs(self) -> dict[str, Any]:
        """redis-py's keyword arguments for these settings."""
        return {
            "ssl": True,
            "ssl_ca_certs": self.ca_certs,
            "ssl_certfile": self.certfile,
            "ssl_keyfile": self.keyfile,
            "ssl_cert_reqs": self.cert_reqs,
            "ssl_check_hostname": self.check_hostname,
        }


@dataclass(frozen=True, slots=True)
class HaOptions:
    """What the query of a Sentinel or Cluster URL says.

    Attributes:
        tls: TLS settings (a ``rediss+…`` URL), or None for plain TCP.
        sentinel_username: the sentinels' ACL user, or None.
        sentinel_password: the sentinels' password, or None (never shown in a repr).
    """

    tls: RedisTls | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)


def parse_ha_options(query: str, kind: str, tls: bool) -> HaOptions:
    """Read the query of a ``redis+sentinel``/``redis+cluster`` URL (``rediss+…`` when ``tls``).

    Raises:
        ConfigError: an unknown or repeated option, a TLS option without TLS, a sentinel
            option in a cluster URL, a bad value, or a certificate file that does not exist.
    """
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"redis: the {kind} URL's query is malformed") from exc
    given: dict[str, str] = {}
    for name, value in pairs:
        if name not in URL_OPTIONS:
            raise ConfigError(f"redis: unknown {kind} URL option {name!r}")
        if name in given:
            raise ConfigError(f"redis: the option {name} is given twice")
        if name in _TLS_OPTIONS and not tls:
            raise ConfigError(f"redis: {name} needs a rediss+{kind}:// URL")
        if name in _SENTINEL_OPTIONS and kind != "sentinel":
            raise ConfigError(f"redis: {name} is an option of redis+sentinel:// URLs only")
        given[name] = value
    return HaOptions(
        _tls(given) if tls else None,
        given.get("sentinel_username") or None,
        given.get("sentinel_password") or None,
    )


def _tls(given: Mapping[str, str]) -> RedisTls:
    for name in _TLS_FILES:
        path = given.get(name)
        if path is not None and not os.path.isfile(path):
            raise ConfigError(f"redis: {name} names no readable file")
    if "ssl_keyfile" in given and "ssl_certfile" not in given:
        raise ConfigError("redis: ssl_keyfile needs ssl_certfile")
    cert_reqs = given.get("ssl_cert_reqs", "required")
    if cert_reqs not in _CERT_REQS:
        raise ConfigError(f"redis: ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}")
    check_text = given.get("ssl_check_hostname", "true").lower()
    if check_text not in _BOOLS:
        raise ConfigError("redis: ssl_check_hostname must be true or false")
    return RedisTls(
        given.get("ssl_ca_certs"),
        given.get("ssl_certfile"),
        given.get("ssl_keyfile"),
        cert_reqs,
        _BOOLS[check_text],
    )


def fold_into_url(url: object, options: Mapping[str, object]) -> object:
    """``url`` with the ``[redis]`` table's URL options (:data:`URL_OPTIONS`) added to its query.

    A non-string ``url`` comes back as it is (the ``redis`` check reports it).

    Raises:
        ConfigError: an option that is not a string (a bool for ``ssl_check_hostname``), or one
            the URL's query already holds.
    """
    if not options or not isinstance(url, str):
        return url
    base, _, query = url.partition("?")
    present = {name for name, _ in parse_qsl(query, keep_blank_values=True)}
    extra: list[tuple[str, str]] = []
    for name, value in options.items():
        if name in present:
            raise ConfigError(f"redis.{name} is set twice: in redis.url and as redis.{name}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str):
            raise ConfigError(f"redis.{name} must be a string")
        extra.append((name, value))
    return f"{base}?{query + '&' if query else ''}{urlencode(extra)}"
