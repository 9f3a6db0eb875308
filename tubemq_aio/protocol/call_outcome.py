"""Whether a broker call that ended without an answer may still reach the broker.

The broker keeps one batch in flight per group and partition, a GetMessage without the commit
flag reads again from the committed offset, a CommitOffset (or a GetMessage with the flag)
commits whatever was read last, and requests of different connections are not ordered there: a
request is executed whenever it arrives (``docs/protocol/consumer.md`` §4.2). So a GetMessage or
CommitOffset a client stopped waiting for (a timeout, a connection lost after the write) that
the broker executes later can move the group's cursor or commit a batch nobody received. A
reader must therefore not read the partition again until such a request has had its time
(the SDK consumers: ``docs/reliability.md``; the gateway: ``docs/gateway.md``, "Read-ahead off
the critical path").
"""

from __future__ import annotations

from tubemq_aio.errors import (
    ConfigError,
    ConnectError,
    PartitionNotSubscribableError,
    ProtocolError,
    RemoteRpcError,
    RequestNotSentError,
    ServerError,
)

__all__ = ["ANSWERED", "may_still_arrive"]

#: How a broker call ends when nothing of it can reach the broker later: the broker answered
#: (a refusal, a remote exception, an answer that did not parse), or nothing was sent (the
#: connection could not be made or broke before the write, or the call was refused locally).
#: Any other end (a timeout, a connection lost after the write, a cancel) may leave it on the way.
ANSWERED: tuple[type[BaseException], ...] = (
    ServerError,
    RemoteRpcError,
    ProtocolError,
    RequestNotSentError,
    ConnectError,
    ConfigError,
    PartitionNotSubscribableError,
)


def may_still_arrive(error: BaseException) -> bool:
    """Whether the request of a call that raised ``error`` may still be executed by the broker
    later (True unless ``error`` is one of :data:`ANSWERED`)."""
    return not isinstance(error, ANSWERED)
