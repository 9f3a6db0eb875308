"""Producer client ids (sans-I/O; every input is passed in).

Shape, as the Java producer builds it (shared protocol notes §4.1)::

    <localIPv4>-<pid>-<monotonic ns>-<abs(random int)>-<client version>

The master only checks that the id is non-blank and at most 1024 characters.
"""

from __future__ import annotations

from tubemq_aio.errors import ConfigError

__all__ = ["CLIENT_VERSION_PREFIX", "MAX_CLIENT_ID_LENGTH", "make_client_id"]

#: Longest client id the master accepts (``META_MAX_CLIENT_ID_LENGTH``).
MAX_CLIENT_ID_LENGTH = 1024
#: Prefix of the version part of our ids, so our clients are recognisable in master listings.
CLIENT_VERSION_PREFIX = "tubemq-aio-"


def make_client_id(
    local_ip: str, pid: int, monotonic_ns: int, random_int: int, version: str
) -> str:
    """Build a producer client id.

    Args:
        local_ip: the local IPv4 address (also sent as ``hostName``).
        pid: the process id.
        monotonic_ns: a monotonic clock reading in nanoseconds (Java ``System.nanoTime()``).
        random_int: a random int; its absolute value is used.
        version: our client version, e.g. ``"tubemq-aio-0.1.0"``.

    Returns:
        ``f"{local_ip}-{pid}-{monotonic_ns}-{abs(random_int)}-{version}"``.

    Raises:
        ConfigError: ``local_ip`` or ``version`` is blank, or the id exceeds 1024 characters.
    """
    if not local_ip.strip() or not version.strip():
        raise ConfigError("local_ip and version must not be blank")
    client_id = f"{local_ip.strip()}-{pid}-{monotonic_ns}-{abs(random_int)}-{version.strip()}"
    if len(client_id) > MAX_CLIENT_ID_LENGTH:
        raise ConfigError(f"client id longer than {MAX_CLIENT_ID_LENGTH} chars")
    return client_id
