"""The tubemq-server versions a :class:`LocalCluster` can run, and what each one needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tubemq_aio.protocol.legacy_framing import Framing
from tubemq_aio.testing._errors import UnsupportedVersionError

__all__ = ["SERVER_VERSIONS", "ServerVersion", "server_version"]


@dataclass(frozen=True)
class ServerVersion:
    """How the harness downloads and runs one tubemq-server release.

    Attributes:
        version: The Maven version of ``org.apache.inlong:tubemq-server``.
        framing: The transport framing clients of this server must use (``"legacy-length"``
            for 1.1.0 and 1.2.0, see docs/protocol/wire.md §1.7).
        pom: Packaged POM file listing the runtime dependencies.
        pom_properties: ``-D`` overrides of that POM's properties (``name -> value``).
        plain_jars: Artifacts (``group:artifact:version``) copied without reading their POM
            (their parent POM is not on Maven Central), besides tubemq-server itself.
        zookeeper: True when the master keeps its metadata in ZooKeeper and brokers their
            offsets there (1.x), so the harness starts a ZooKeeper node; False: BDB-JE only.
    """

    version: str
    framing: Framing
    pom: str
    pom_properties: Mapping[str, str] = field(default_factory=dict)
    plain_jars: tuple[str, ...] = ()
    zookeeper: bool = False


_CORE = "org.apache.inlong:tubemq-core"

SERVER_VERSIONS: Mapping[str, ServerVersion] = MappingProxyType(
    {
        "2.4.0": ServerVersion("2.4.0", "standard", "runtime-pom.xml"),
        "1.2.0-incubating": ServerVersion(
            "1.2.0-incubating",
            "legacy-length",
            "runtime-pom-1.x.xml",
            plain_jars=(f"{_CORE}:1.2.0-incubating",),
            zookeeper=True,
        ),
        "1.1.0-incubating": ServerVersion(
            "1.1.0-incubating",
            "legacy-length",
            "runtime-pom-1.x.xml",
            pom_properties={"spring.version": "5.3.18", "guava.version": "19.0"},
            plain_jars=(f"{_CORE}:1.1.0-incubating",),
            zookeeper=True,
        ),
    }
)
"""Every tubemq-server version :class:`LocalCluster` can run (``version=``), each with how the
harness runs it: the three releases on Maven Central (docs/local-cluster.md, "Server versions").
"""
"""Every version :class:`LocalCluster` can run, by Maven version (see docs/local-cluster.md)."""


def server_version(version: str) -> ServerVersion:
    """Return how to run ``version``.

    Args:
        version: A key of :data:`SERVER_VERSIONS`, e.g. ``"2.4.0"`` or ``"1.2.0-incubating"``.

    Returns:
        Its :class:`ServerVersion`.

    Raises:
        UnsupportedVersionError: For any other value (the message lists the supported ones).
    """
    found = SERVER_VERSIONS.get(version) if isinstance(version, str) else None
    if found is None:
        known = ", ".join(SERVER_VERSIONS)
        raise UnsupportedVersionError(
            f"LocalCluster cannot run tubemq-server {version!r}; supported versions: {known}"
        )
    return found
