"""One rule for a client TLS context from file paths (``tubemq_aio.tls.TlsFiles``), wherever
the paths come from: a connection URL, the CLI, the gateway's ``[tubemq]`` table and the Spark
options. Each entry point's context completes a two-way TLS handshake with a server that
requires a client certificate, and each names an unloadable file in the same words (the Spark
options had no client certificate at all, and the gateway accepted a key alone silently)."""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.self_signed import self_signed_cert
from tubemq_aio import ConsumerConfig
from tubemq_aio.cli._connect import add_connection_options, connection_options
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.config.tubemq_access import TubeMQAccess
from tubemq_aio.spark._options import parse_client_settings
from tubemq_aio.tls import TlsFiles


async def _handshake(client: ssl.SSLContext, server_pair: tuple[Path, Path], ca: Path) -> str:
    """Connect with ``client`` to a server that requires a client certificate signed by
    ``ca``; the subject CN the server saw."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.load_cert_chain(*server_pair)
    seen: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert")
        seen.append(dict(x[0] for x in peer["subject"])["commonName"])
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="localhost"
            )
            await reader.read()
            writer.close()
    finally:
        server.close()
        await server.wait_closed()
    return seen[0]


def _cli(*argv: str) -> ssl.SSLContext:
    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    context = connection_options(parser.parse_args(list(argv)))["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    return context


def _entry_points(server: Path, cert: Path, key: Path) -> dict[str, Callable[[], object]]:
    """A client context from each entry point, trusting ``server`` and presenting cert/key."""
    url = f"tubemq://h:1?group=g1&topic=t&tls_ca_file={server}&tls_cert_file={cert}"
    url += f"&tls_key_file={key}"
    spark = {"master": "h:1", "tls": "true", "tlsCaFile": str(server)}
    spark |= {"tlsCertFile": str(cert), "tlsKeyFile": str(key)}
    access = TubeMQAccess(tls=True, tls_files=TlsFiles(str(server), str(cert), str(key)))
    return {
        "TlsFiles": lambda: TlsFiles(str(server), str(cert), str(key)).context(),
        "URL": lambda: ConsumerConfig.from_url(url).ssl_context,
        "CLI": lambda: _cli(
            "--tls-ca", str(server), "--tls-cert", str(cert), "--tls-key", str(key)
        ),
        "gateway": access.ssl_context,
        "Spark": lambda: parse_client_settings(spark).kwargs()["ssl_context"],
    }


@pytest.mark.parametrize("entry", ["TlsFiles", "URL", "CLI", "gateway", "Spark"])
async def test_every_entry_point_presents_the_client_certificate(
    tmp_path: Path, entry: str
) -> None:
    server = self_signed_cert(tmp_path / "server")
    cert, key = self_signed_cert(tmp_path / "client")
    context = _entry_points(server[0], cert, key)[entry]()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert await _handshake(context, server, ca=cert) == "localhost"


@pytest.mark.parametrize("entry", ["TlsFiles", "URL", "CLI", "gateway", "Spark"])
def test_every_entry_point_names_an_unloadable_key_in_the_same_words(
    tmp_path: Path, entry: str
) -> None:
    server, _ = self_signed_cert(tmp_path / "server")
    cert, _ = self_signed_cert(tmp_path / "client")
    bad_key = tmp_path / "bad-key.pem"
    bad_key.write_text("not a key")
    with pytest.raises(ConfigError) as info:
        _entry_points(server, cert, bad_key)[entry]()
    assert f"TLS certificate {str(cert)!r} / {str(bad_key)!r} cannot be loaded" in str(info.value)


def test_a_key_without_its_certificate_is_refused_everywhere(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_text("unused")
    with pytest.raises(ConfigError, match="key file needs its certificate"):
        TlsFiles(key_file=str(key)).context()
    with pytest.raises(ConfigError, match="key file needs its certificate"):
        ConsumerConfig.from_url(f"tubemq://h:1?group=g1&topic=t&tls_key_file={key}")
    with pytest.raises(ConfigError, match="tlsKeyFile"):
        parse_client_settings({"master": "h:1", "tls": "true", "tlsKeyFile": str(key)})
    with pytest.raises(ConfigError, match="tls_key_file needs tls_cert_file"):
        TubeMQAccess(tls=True, tls_files=TlsFiles(key_file=str(key)))
    with pytest.raises(ConfigError, match="--tls-key needs --tls-cert"):
        _cli("--tls-key", str(key))


def test_a_missing_ca_file_is_named_with_its_reason(tmp_path: Path) -> None:
    missing = tmp_path / "none.pem"
    with pytest.raises(ConfigError) as info:
        TlsFiles(ca_file=str(missing)).context()
    assert (
        str(info.value)
        == f"TLS CA file {str(missing)!r} cannot be loaded (No such file or directory)"
    )
