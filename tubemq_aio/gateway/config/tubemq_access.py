"""How the gateway reaches a secured TubeMQ cluster: TLS and credentials (``[tubemq]``).

The same options the SDK clients take (``ssl_context``, ``tls_server_hostname``,
``credentials``), written as TOML: file paths instead of an ``SSLContext``. ``masters`` may
also be a ``tubemq://user:password@host:port,…`` or ``tubemqs://…`` URL, as the SDK's
``from_url`` reads it; its parts land here and ``masters`` keeps only the addresses. The
password never appears in a repr, a log line or an error text.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tubemq_aio.auth import Credentials
from tubemq_aio.checks import Checks
from tubemq_aio.config import ClientConfig, parse_masters, redact_url
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.toml_table import checked_table
from tubemq_aio.protocol.legacy_framing import FRAMINGS, Framing
from tubemq_aio.tls import TlsFiles

__all__ = ["TubeMQAccess", "split_masters_url"]

_KEYS = frozenset(
    {
        "user",
        "password",
        "tls",
        "tls_ca_file",
        "tls_cert_file",
        "tls_key_file",
        "tls_server_hostname",
        "framing",
    }
)
#: The ``[tubemq]`` keys of the TLS files, in :class:`~tubemq_aio.tls.TlsFiles` order.
_FILES = ("tls_ca_file", "tls_cert_file", "tls_key_file")


@dataclass(frozen=True, slots=True, kw_only=True)
class TubeMQAccess:
    """TLS and authentication towards the TubeMQ master and brokers (``[tubemq]``).

    Attributes:
        user: user name when the cluster authenticates clients (with ``password``).
        password: its password; never shown.
        tls: connect with TLS (then ``masters`` lists the masters' TLS ports). Certificates are
            checked against the system CAs, or ``tls_ca_file``, and each peer's host name.
        tls_files: the PEM files (:class:`~tubemq_aio.tls.TlsFiles`), written as the keys
            ``tls_ca_file`` (the CAs to trust instead of the system ones), ``tls_cert_file``
            (client certificate, for clusters that require one: two-way TLS) and
            ``tls_key_file`` (its private key, if not inside the certificate file).
        tls_server_hostname: one name to check in every peer's certificate instead of each
            peer's own host.
        framing: ``"standard"``, or ``"legacy-length"`` for TubeMQ servers 1.1.0 and 1.2.0
            (docs/protocol/wire.md §1.7).
    """

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_files: TlsFiles = field(default_factory=TlsFiles)
    tls_server_hostname: str | None = None
    framing: Framing = "standard"

    def __post_init__(self) -> None:
        checks = Checks("tubemq")
        checks.choice("tubemq.framing", self.framing, FRAMINGS)
        if (self.user is None) != (self.password is None):
            checks.problem("tubemq.user and tubemq.password go together")
        if self.user is not None:
            if not isinstance(self.user, str) or not self.user.strip():
                checks.problem("tubemq.user must be a non-blank string")
            if not isinstance(self.password, str) or not self.password:
                checks.problem("tubemq.password must be a non-empty string")  # never shown
        if not isinstance(self.tls, bool):
            checks.problem("tubemq.tls must be true or false")  # TOML's spelling
        if not isinstance(self.tls_files, TlsFiles):
            checks.problem("tubemq.tls_files must be a TlsFiles")
            files: tuple[object, ...] = (None, None, None)
        else:
            files = (self.tls_files.ca_file, self.tls_files.cert_file, self.tls_files.key_file)
        given = (
            *zip(_FILES, files, strict=True),
            ("tls_server_hostname", self.tls_server_hostname),
        )
        for key, value in given:
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip():
                checks.problem(f"tubemq.{key} must be a non-empty string")
            elif not self.tls:
                checks.problem(f"tubemq.{key} needs tls = true")
            elif key in _FILES and not Path(value).is_file():
                checks.problem(f"tubemq.{key}: {value!r} is not a file")
        if files[2] is not None and files[1] is None:
            checks.problem("tubemq.tls_key_file needs tls_cert_file")
        checks.done()

    @property
    def credentials(self) -> Credentials | None:
        """The SDK credentials, or None without a user."""
        if self.user is None or self.password is None:
            return None
        return Credentials(self.user, self.password)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A new client TLS context (None without ``tls``).

        Raises:
            ConfigError: a CA, certificate or key file cannot be loaded.
        """
        if not self.tls:
            return None
        try:
            return self.tls_files.context()
        except ConfigError as err:
            raise ConfigError(f"tubemq: {err}") from None

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for an SDK ``Producer`` / ``Consumer`` (only the ones set)."""
        options: dict[str, Any] = {}
        context = self.ssl_context()
        if context is not None:
            options["ssl_context"] = context
        if self.tls_server_hostname is not None:
            options["tls_server_hostname"] = self.tls_server_hostname
        if self.credentials is not None:
            options["credentials"] = self.credentials
        if self.framing != "standard":
            options["framing"] = self.framing
        return options

    @classmethod
    def from_mapping(cls, raw: object, masters: object = None) -> TubeMQAccess:
        """Validate a parsed ``[tubemq]`` table; with ``masters`` a ``tubemqs://`` URL, ``tls``
        defaults to true (so the table's TLS files apply).

        Raises:
            ConfigError: not a table, an unknown key, or an invalid value.
        """
        options = checked_table(raw, "tubemq", _KEYS)
        if isinstance(masters, str) and masters.strip().startswith("tubemqs://"):
            options.setdefault("tls", True)
        files = [options.pop(key, None) for key in _FILES]
        return cls(**options, tls_files=TlsFiles(*files))

    def table(self) -> dict[str, object]:
        """The ``[tubemq]`` table this value reads from (the keys a file writes, the TLS files
        as their three keys); the password is included, for the caller to mask."""
        files = self.tls_files
        return {
            "user": self.user,
            "password": self.password,
            "tls": self.tls,
            "tls_ca_file": files.ca_file,
            "tls_cert_file": files.cert_file,
            "tls_key_file": files.key_file,
            "tls_server_hostname": self.tls_server_hostname,
            "framing": self.framing,
        }


def split_masters_url(masters: str, access: TubeMQAccess) -> tuple[str, TubeMQAccess]:
    """``masters`` as a plain address list, with a URL's credentials and TLS moved to ``access``.

    A plain ``host:port,…`` list comes back unchanged.

    Raises:
        ConfigError: the URL is invalid, has options (they belong in ``[tubemq]``), or sets
            credentials ``[tubemq]`` sets too.
    """
    text = masters.strip()
    if not text.startswith(("tubemq://", "tubemqs://")):
        if "://" in text or "@" in text:
            raise ConfigError(
                f"masters: {redact_url(text)!r} is not a valid host:port list or a "
                "tubemq:// / tubemqs:// URL"
            )
        try:
            parse_masters(text)
        except ConfigError as err:
            raise ConfigError(f"masters: {err}") from None
        return masters, access
    try:
        query = urlsplit(text).query
    except ValueError:
        query = ""  # from_url below names the problem
    if query:
        raise ConfigError(
            f"masters: {redact_url(text)!r}: options go in the [tubemq] table, not the URL"
        )
    try:
        parsed = ClientConfig.from_url(text)
    except ConfigError as err:
        raise ConfigError(f"masters: {err}") from None
    if parsed.credentials is not None:
        if access.user is not None:
            raise ConfigError("masters: the URL and [tubemq] both give a user; keep one")
        access = replace(
            access, user=parsed.credentials.user_name, password=parsed.credentials.password
        )
    if parsed.ssl_context is not None and not access.tls:
        access = replace(access, tls=True)
    return ",".join(str(address) for address in parsed.masters), access
