"""TLS for the Redis test tools: the server directives and the tools' own client context.

A server or sentinel with TLS listens only on its TLS port (``port 0``, ``tls-port <port>``),
replicates over TLS (``tls-replication yes``, which the sentinels also use towards the data
nodes and each other) and asks its clients for a certificate signed by the same CA. The
material is :func:`~tubemq_aio.testing.make_tls_material`'s self-signed pair, which is CA,
server certificate and client certificate at once.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlencode

from tubemq_aio.testing._tls import TlsMaterial

__all__ = ["client_context", "client_url_options", "tls_directives"]


def _key(tls: TlsMaterial) -> str:
    if tls.client_key is None:
        raise ValueError("Redis TLS needs the material's private key (openssl was missing)")
    return str(tls.client_key)


def tls_directives(tls: TlsMaterial, port: int) -> dict[str, str]:
    """The config directives (name → value) of a TLS-only server or sentinel on ``port``."""
    return {
        "port": "0",
        "tls-port": str(port),
        "tls-cert-file": str(tls.client_cert),
        "tls-key-file": _key(tls),
        "tls-ca-cert-file": str(tls.ca_pem),
        "tls-replication": "yes",
    }


def client_context(tls: TlsMaterial) -> ssl.SSLContext:
    """The context the tools' admin queries connect with (trusting the CA, showing the pair)."""
    context = ssl.create_default_context(cafile=str(tls.ca_pem))
    context.load_cert_chain(str(tls.client_cert), _key(tls))
    return context


def client_url_options(tls: TlsMaterial) -> str:
    """The query of a ``rediss…`` URL that trusts the CA and shows the pair (mutual TLS)."""
    return urlencode(
        {
            "ssl_ca_certs": str(tls.ca_pem),
            "ssl_certfile": str(tls.client_cert),
            "ssl_keyfile": _key(tls),
        }
    )
