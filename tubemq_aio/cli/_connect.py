"""How every command reaches the master: address or ``tubemq[s]://`` URL, TLS files, credentials,
and the framing of old servers.

The password comes from ``--password`` or from ``$TUBEMQ_AIO_PASSWORD`` (better: it stays out of
the shell history and the process list). It is never printed: errors name the option, never the
value, and URLs are shown with their user info replaced by ``***``.
"""

from __future__ import annotations

import argparse
import os
import ssl
from typing import Any, Protocol, TypeVar

from tubemq_aio.auth import Credentials
from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError
from tubemq_aio.protocol.legacy_framing import FRAMINGS
from tubemq_aio.tls import TlsFiles

__all__ = ["PASSWORD_ENV", "add_connection_options", "connection_options", "open_client"]

PASSWORD_ENV = "TUBEMQ_AIO_PASSWORD"
URL_SCHEMES = ("tubemq://", "tubemqs://")

C = TypeVar("C", covariant=True)


class _ClientClass(Protocol[C]):
    """A client class with the two constructors every CLI client has."""

    # ``*args: Any, **kwargs: Any`` is the gradual form: the clients' typed ``**options``
    # (``Unpack[...]``) match it, and the options here come from the command line anyway.
    def __call__(self, *args: Any, **kwargs: Any) -> C: ...

    def from_url(self, *args: Any, **kwargs: Any) -> C: ...


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """``--tls-ca/--tls-cert/--tls-key``, ``--user/--password`` and ``--framing`` of one command."""
    tls = parser.add_argument_group("TLS and authentication")
    tls.add_argument(
        "--tls-ca", metavar="FILE", help="CA certificate(s) (PEM) to trust; turns TLS on"
    )
    tls.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM); turns TLS on")
    tls.add_argument("--tls-key", metavar="FILE", help="private key of --tls-cert (PEM)")
    tls.add_argument("--user", metavar="NAME", help="user name, when the cluster authenticates")
    tls.add_argument(
        "--password",
        metavar="SECRET",
        help=f"password of --user (better: set ${PASSWORD_ENV}); never printed",
    )
    tls.add_argument(
        "--framing",
        choices=FRAMINGS,
        help="frame delimiting: standard (default; servers from 1.3.0 on) or legacy-length "
        "(servers 1.1.0 and 1.2.0); docs/protocol/wire.md §1.7",
    )


def _tls_context(checks: Checks, args: argparse.Namespace) -> ssl.SSLContext | None:
    if args.tls_key and not args.tls_cert:
        checks.problem("--tls-key needs --tls-cert")
        return None
    if not (args.tls_ca or args.tls_cert):
        return None
    try:
        return TlsFiles(args.tls_ca, args.tls_cert, args.tls_key).context()
    except ConfigError as err:
        checks.problem(f"--tls-ca/--tls-cert/--tls-key: {err}")
        return None


def _credentials(checks: Checks, args: argparse.Namespace) -> Credentials | None:
    password = args.password if args.password is not None else os.environ.get(PASSWORD_ENV)
    if args.user is None:
        if args.password is not None:
            checks.problem("--password needs --user")
        return None
    if not password:
        checks.problem(f"--user needs a password: --password or ${PASSWORD_ENV}")
        return None
    try:
        return Credentials(args.user, password)
    except ConfigError as exc:
        checks.adopt(exc)
        return None


def connection_options(args: argparse.Namespace) -> dict[str, Any]:
    """``ssl_context``, ``credentials`` and ``framing`` keywords from the command line (only
    those given).

    A ``tubemqs://`` address already selects TLS with the system's CAs; ``--tls-ca`` or
    ``--tls-cert`` replace that context. ``--user`` replaces credentials of a URL, ``--framing``
    a URL's ``framing`` key.

    Raises:
        ConfigError: an option misses its partner, or a TLS file cannot be loaded.
    """
    checks = Checks("arguments")
    options: dict[str, Any] = {}
    ctx = _tls_context(checks, args)
    if ctx is not None:
        options["ssl_context"] = ctx
    credentials = _credentials(checks, args)
    if credentials is not None:
        options["credentials"] = credentials
    if args.framing is not None:
        options["framing"] = args.framing
    checks.done()
    return options


def open_client(cls: _ClientClass[C], args: argparse.Namespace, **options: Any) -> C:
    """``cls`` for ``args.master`` (an address list or a ``tubemq[s]://`` URL) with the
    connection options of the command line and ``options``.

    Raises:
        ConfigError: a bad address, URL or option.
    """
    options = {**connection_options(args), **options}
    master: str = args.master
    if master.startswith(URL_SCHEMES):
        return cls.from_url(master, **options)
    if "://" in master:
        scheme = master.partition("://")[0]
        checks = Checks("arguments")
        checks.fail(
            f"--master: unknown scheme {scheme}:// (use host:port, tubemq:// or tubemqs://)"
        )
    return cls(master, **options)
