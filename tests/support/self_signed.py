"""A self-signed certificate and its key made by ``openssl`` (a few milliseconds, where
``make_tls_material`` starts ``keytool``, a JVM, four times): for TLS tests without a cluster.

The key is an elliptic-curve one (P-256): a 2048-bit RSA key took openssl about 0.25 CPU-s,
which the TLS tests of ``make unit`` paid about twenty times; what they check (files loaded,
two-way handshakes, host names, error wording) does not depend on the key's kind."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

__all__ = ["self_signed_cert"]


def self_signed_cert(
    directory: Path, name: str = "localhost", alt_names: str = "DNS:localhost"
) -> tuple[Path, Path]:
    """``(cert.pem, key.pem)`` in ``directory`` (created): a certificate for ``name`` (its CN)
    and ``alt_names`` (openssl's subjectAltName list), its own CA, valid for a day; the key is
    a P-256 EC key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *shlex.split("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"),
            *shlex.split("-nodes -days 1 -subj"),
            f"/CN={name}",
            "-addext",
            f"subjectAltName={alt_names}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
