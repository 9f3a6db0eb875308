"""Self-signed TLS material for TLS tests, made with the JDK's ``keytool`` (no network)."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from tubemq_aio.testing._config import TlsSettings
from tubemq_aio.testing._errors import ClusterError
from tubemq_aio.testing._maven import find_tool
from tubemq_aio.testing._process import option_args

__all__ = ["TlsMaterial", "make_tls_material"]


@dataclass(frozen=True)
class TlsMaterial:
    """Files for a TLS-enabled :class:`LocalCluster` and its clients.

    Attributes:
        settings: Pass as ``LocalCluster(tls=...)``.
        ca_pem: The server certificate in PEM (trust it from Python: ``ssl.create_default_context(
            cafile=ca_pem)``; it is valid for 127.0.0.1, 127.0.0.2 and localhost).
        truststore: JKS trust store holding the certificate (for Java clients).
        password: Password of both stores.
        client_cert: PEM client certificate trusted by the servers (the same self-signed pair).
        client_key: PEM private key of ``client_cert`` (unencrypted), or None when ``openssl``
            is not installed. Python: ``ctx.load_cert_chain(client_cert, client_key)``.
    """

    settings: TlsSettings
    ca_pem: Path
    truststore: Path
    password: str
    client_cert: Path
    client_key: Path | None


async def _keytool(keytool: str, log: Path, *args: str) -> None:
    """Run keytool (or openssl) with output appended to ``log``; raise on failure."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            keytool, *args, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out
        )
        async with asyncio.timeout(60):
            rc = await proc.wait()
    if rc != 0:
        raise ClusterError(f"{Path(keytool).name} {args[0]} failed with exit code {rc}", log)


async def make_tls_material(directory: Path, password: str = "changeit") -> TlsMaterial:
    """Create a self-signed server key store, its PEM certificate and a JKS trust store.

    Args:
        directory: Where to write ``server.jks``, ``ca.pem``, ``trust.jks`` (created if needed).
        password: Store and key password (TubeMQ uses one password for both).

    Returns:
        The material.

    Raises:
        ToolNotFoundError: If ``keytool`` is missing.
        ClusterError: If keytool fails (names ``keytool.log``).
    """
    keytool = find_tool("keytool", "install a Java 17 runtime (`make system-deps`)")
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    keystore, ca_pem, trust = (directory / n for n in ("server.jks", "ca.pem", "trust.jks"))
    log = directory / "keytool.log"
    for name in ("server.jks", "ca.pem", "trust.jks", "client.p12", "client-key.pem"):
        (directory / name).unlink(missing_ok=True)
    store = {"-storetype": "JKS", "-storepass": password}
    server_key = {
        "-alias": "tubemq",
        "-keyalg": "RSA",
        "-keysize": "2048",
        "-validity": "3650",
        "-dname": "CN=127.0.0.1",
        "-ext": "SAN=IP:127.0.0.1,IP:127.0.0.2,DNS:localhost",
        "-keystore": str(keystore),
        **store,
        "-keypass": password,
    }
    await _keytool(keytool, log, "-genkeypair", *option_args(server_key))
    export = {
        "-alias": "tubemq",
        "-keystore": str(keystore),
        "-storepass": password,
        "-file": str(ca_pem),
    }
    await _keytool(keytool, log, "-exportcert", "-rfc", *option_args(export))
    trust_ca = {"-alias": "tubemq", "-file": str(ca_pem), "-keystore": str(trust), **store}
    await _keytool(keytool, log, "-importcert", "-noprompt", *option_args(trust_ca))
    client_key = await _export_key(directory, keystore, password, log)
    # Two-way TLS is the only mode that works on the 2.4.0 server: with one-way TLS its config
    # loader drops tlsTrustStorePath, but the SSL engine factory opens it on every accept and
    # the server calls System.exit ("init SSLEngine error, system auto exit!").
    settings = TlsSettings(
        keystore, password, truststore=trust, truststore_password=password, two_way=True
    )
    return TlsMaterial(settings, ca_pem, trust, password, ca_pem, client_key)


async def _export_key(directory: Path, keystore: Path, password: str, log: Path) -> Path | None:
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    p12, key = directory / "client.p12", directory / "client-key.pem"
    keytool = find_tool("keytool", "install a Java 17 runtime")
    to_p12 = {
        "-srckeystore": str(keystore),
        "-srcstorepass": password,
        "-destkeystore": str(p12),
        "-deststoretype": "PKCS12",
        "-deststorepass": password,
    }
    await _keytool(keytool, log, "-importkeystore", "-noprompt", *option_args(to_p12))
    to_pem = {"-in": str(p12), "-passin": f"pass:{password}", "-out": str(key)}
    await _keytool(openssl, log, "pkcs12", "-nocerts", "-nodes", *option_args(to_pem))
    return key
