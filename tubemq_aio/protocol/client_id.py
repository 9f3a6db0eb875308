"""Client ids of producers and consumers (sans-I/O; every input is passed in).

Shapes, as the Java clients build them
(docs/protocol/wire.md §4.1, docs/protocol/consumer.md §1.2)::

    producer:  <localIPv4>-<pid>-<monotonic ns>-<abs(random int)>-<client version>
    consumer:  <group>_<localIPv4>-<pid>-<monotonic ns>-<abs(random int)>-<kind>-<version>

``kind`` is ``Pull`` for the server-balanced consumer and ``Balance`` for the client-balanced
one. The broker reads ``ip#pid`` from the text after the last ``_``, so nothing after the group
may contain ``_``. The master only checks that the id is non-blank and at most 1024 characters.
"""

from __future__ import annotations

from tubemq_aio.checks import Checks

__all__ = [
    "CLIENT_VERSION_PREFIX",
    "MAX_CLIENT_ID_LENGTH",
    "MAX_CONSUMER_GROUP_LENGTH",
    "MAX_VERSION_LENGTH",
    "make_client_id",
]

#: Longest client id the master accepts (``META_MAX_CLIENT_ID_LENGTH``).
MAX_CLIENT_ID_LENGTH = 1024
#: Longest client version an id carries.
MAX_VERSION_LENGTH = 32
#: The longest a consumer id's part after ``<group>_`` can be: the longest IPv4 address, a
#: pid under Linux's highest ``pid_max`` (2**22), a 64-bit nanosecond reading, a 31-bit
#: random int, the longer kind and the longest version.
_CONSUMER_TAIL_MAX = len(f"255.255.255.255-{2**22}-{2**64 - 1}-{2**31 - 1}-Balance-") + (
    MAX_VERSION_LENGTH
)
#: Longest group a consumer id always has room for, whatever the host, pid and clock (927):
#: a longer one, though within the 1024 of a group name, makes an id the master refuses.
MAX_CONSUMER_GROUP_LENGTH = MAX_CLIENT_ID_LENGTH - 1 - _CONSUMER_TAIL_MAX
#: Prefix of the version part of our ids, so our clients are recognisable in master listings.
CLIENT_VERSION_PREFIX = "tubemq-aio-"


def make_client_id(
    local_ip: str,
    pid: int,
    monotonic_ns: int,
    random_int: int,
    version: str,
    *,
    group: str | None = None,
    kind: str | None = None,
) -> str:
    """Build a producer id, or a consumer id when ``group`` and ``kind`` are given.

    Args:
        local_ip: the local IPv4 address (also sent as ``hostName``).
        pid: the process id.
        monotonic_ns: a monotonic clock reading in nanoseconds (Java ``System.nanoTime()``).
        random_int: a random int; its absolute value is used.
        version: our client version, e.g. ``"tubemq-aio-0.1.0"``.
        group: the consumer group (consumers only).
        kind: ``"Pull"`` or ``"Balance"`` (consumers only).

    Returns:
        ``f"{local_ip}-{pid}-{monotonic_ns}-{abs(random_int)}-{version}"`` for a producer,
        ``f"{group}_{local_ip}-{pid}-{monotonic_ns}-{abs(random_int)}-{kind}-{version}"`` for
        a consumer.

    Raises:
        ConfigError: ``local_ip`` or ``version`` is blank, ``version`` is longer than 32
            characters, only one of ``group`` and ``kind`` is given, or the id exceeds 1024
            characters.
    """
    checks = Checks("client id")
    checks.text("local_ip", local_ip)
    checks.text("version", version, max_length=MAX_VERSION_LENGTH)
    if (group is None) != (kind is None):
        checks.problem("a consumer id needs both group and kind")
    checks.done()
    tail = version.strip() if kind is None else f"{kind}-{version.strip()}"
    client_id = f"{local_ip.strip()}-{pid}-{monotonic_ns}-{abs(random_int)}-{tail}"
    if group is not None:
        client_id = f"{group}_{client_id}"
    if len(client_id) > MAX_CLIENT_ID_LENGTH:
        checks.fail(f"client id longer than {MAX_CLIENT_ID_LENGTH} chars")
    return client_id
