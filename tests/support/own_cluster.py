"""What a test module starting a real cluster of its own needs: start it or fail every test
that uses it (never a skip), and a client TLS context for a cluster with TLS listeners."""

from __future__ import annotations

import ssl

import pytest

from tubemq_aio.testing import ClusterError, LocalCluster, TlsMaterial


async def start_or_fail(cluster: LocalCluster, what: str) -> None:
    """Start ``cluster``; when it cannot start, fail with its typed error and log tails.

    Args:
        cluster: The cluster (not started).
        what: How the message names it, e.g. ``"the secure TubeMQ cluster"``.
    """
    failure: ClusterError | None = None
    try:
        await cluster.start()
    except ClusterError as err:
        failure = err
    if failure is not None:  # errors every test using the fixture; never a skip
        pytest.fail(f"{what} could not start: {failure}", pytrace=False)


def client_tls_context(
    material: TlsMaterial, *, client_cert: bool = True, trust: bool = True
) -> ssl.SSLContext:
    """A client context: trusts the test CA (or only the system CAs), with the client
    certificate (or without). The default checks stay on: the chain and each peer's host (the
    certificate names 127.0.0.1).

    Args:
        material: The cluster's TLS material.
        client_cert: Present the client certificate (two-way TLS).
        trust: Trust the test CA.

    Returns:
        The context.
    """
    ctx = ssl.create_default_context(cafile=str(material.ca_pem) if trust else None)
    if client_cert:
        assert material.client_key is not None, "openssl is needed for a client key"
        ctx.load_cert_chain(material.client_cert, material.client_key)
    return ctx


def tls_file_args(material: TlsMaterial) -> list[str]:
    """The CLI's ``--tls-ca/--tls-cert/--tls-key`` options for ``material`` (two-way TLS)."""
    assert material.client_key is not None, "openssl is needed for a client key"
    return [
        "--tls-ca",
        str(material.ca_pem),
        "--tls-cert",
        str(material.client_cert),
        "--tls-key",
        str(material.client_key),
    ]
