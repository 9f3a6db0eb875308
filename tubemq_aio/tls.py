"""The TLS context of a client built from file paths: one rule for every entry point.

Connection URLs (``?tls_ca_file=…``), the CLI (``--tls-ca``/``--tls-cert``/``--tls-key``), the
gateway's ``[tubemq]`` table and the Spark options (``tlsCaFile``/``tlsCertFile``/
``tlsKeyFile``) all name the same three files; :class:`TlsFiles` turns them into a verifying
client context, and reports a file that cannot be loaded, or a key without its certificate, in
the same words wherever they came from.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from tubemq_aio.errors import ConfigError

__all__ = ["TlsFiles"]


def _reason(err: OSError) -> str:
    # ssl.SSLError (an OSError) has a reason such as PEM_LIB; a missing file a strerror.
    return str(getattr(err, "reason", None) or err.strerror or type(err).__name__)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Paths of the PEM files of a client TLS context.

    Attributes:
        ca_file: CA bundle to verify the masters' and brokers' certificates with; None trusts
            the system's store.
        cert_file: client certificate, for clusters that require one (mutual TLS); may hold
            the key too.
        key_file: the client certificate's private key, when not in ``cert_file``; needs
            ``cert_file``.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def problems(self) -> list[str]:
        """What is wrong with the combination, without reading any file (``[]`` when
        nothing is)."""
        if self.key_file and not self.cert_file:
            return ["a TLS key file needs its certificate file"]
        return []

    def context(self) -> ssl.SSLContext:
        """A new client context (``ssl.create_default_context``: certificates and host names
        verified) trusting ``ca_file`` and presenting ``cert_file`` when given.

        Raises:
            ConfigError: a key without a certificate, or a file that cannot be read or is not
                a PEM file of the right kind (the message names the file and the reason).
        """
        problems = self.problems()
        if problems:
            raise ConfigError(problems[0])
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(
                f"TLS CA file {self.ca_file!r} cannot be loaded ({_reason(err)})"
            ) from None
        if self.cert_file:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as err:
                files = repr(self.cert_file)
                if self.key_file:
                    files += f" / {self.key_file!r}"
                raise ConfigError(
                    f"TLS certificate {files} cannot be loaded ({_reason(err)})"
                ) from None
        return context
