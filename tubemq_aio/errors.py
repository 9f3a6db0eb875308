"""The exception hierarchy of tubemq-aio.

Every error this package raises is a :class:`TubeMQError`. The families are grouped by what the
caller can do about them (the same split httpcore uses):

* :class:`ConfigError` – the caller passed something invalid; fix the call. Also a ``ValueError``.
* :class:`ClientClosedError` – the client was closed; nothing more can be done with it.
* :class:`NetworkError` – the TCP/TLS link failed; retrying later may help.
* :class:`RequestTimeoutError` – no answer in time; also a builtin ``TimeoutError``.
* :class:`ProtocolError` – the bytes on the wire were wrong: :class:`LocalProtocolError` when we
  produced them, :class:`RemoteProtocolError` when the peer did (the connection is then closed).
* :class:`RemoteRpcError` – the server answered with an exception frame (a Java exception name).
* :class:`ServerError` – the server answered "not successful" with a TubeMQ error code.

Server error codes map to subclasses through :func:`server_error` (its table
:data:`SERVER_ERROR_CLASSES`, and 431 with the request's topics: :class:`TopicNotDeployedError`),
and RPC exception names through :func:`remote_error_for`; nothing else in the package decides
these.

This module is the one home of every exception a user can meet, the subsystem ones included
(consumer arguments, client-balanced partitions, Spark options, TDMsg payloads); the modules that
raise them import them from here, and ``tubemq_aio`` exports them all. ``docs/api.md`` says when
each is raised and what to do about it.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Sequence
from typing import ClassVar

__all__ = [
    "SERVER_ERROR_CLASSES",
    "AdminApiError",
    "AssignmentTimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BoundConsumeError",
    "ClientBalanceConfigError",
    "ClientClosedError",
    "ConfigError",
    "ConnectError",
    "ConnectionLostError",
    "ConsumeSpeedLimitedError",
    "ConsumerConfigError",
    "DataLossError",
    "FlowRuleError",
    "FlushTimeoutError",
    "ForbiddenError",
    "FrameError",
    "InternalServerError",
    "InvalidConfirmContextError",
    "InvalidMessageError",
    "LocalProtocolError",
    "MalformedMetaError",
    "MessageDecodeError",
    "MessageMovedError",
    "MessageNotFoundError",
    "MessageTooLargeError",
    "NetworkError",
    "NoMasterServiceError",
    "NoPartitionError",
    "NotRegisteredError",
    "PartitionAlreadyConnectedError",
    "PartitionNotConnectedError",
    "PartitionNotSubscribableError",
    "PartitionOccupiedError",
    "ProtocolError",
    "RemoteProtocolError",
    "RemoteRpcError",
    "RequestNotSentError",
    "RequestTimeoutError",
    "SendOutcomeUnknownError",
    "SendWindowFullError",
    "ServerError",
    "ServerNotReadyError",
    "ServerOverflowError",
    "ServiceNotPublishedError",
    "ServiceStoppingError",
    "ServiceUnavailableError",
    "SinkOptionError",
    "SinkSchemaError",
    "SourceOptionError",
    "StandbyMasterError",
    "TDMsgError",
    "TopicNotDeployedError",
    "TopicUnavailableError",
    "TubeMQError",
    "UnknownPartitionError",
    "WriteTimeoutError",
    "remote_error_for",
    "server_error",
]


class TubeMQError(Exception):
    """Root of every exception raised by tubemq-aio."""


class ConfigError(TubeMQError, ValueError):
    """A configuration value or call argument is invalid. Raised before any network traffic."""


class ClientClosedError(TubeMQError):
    """The client (or the connection a request was queued on) was closed."""


class NetworkError(TubeMQError):
    """The network link to a master or broker failed."""


class ConnectError(NetworkError):
    """A TCP/TLS connection could not be established."""


class ConnectionLostError(NetworkError):
    """An established connection was lost while the request was pending.

    The server may or may not have processed the request.
    """


class RequestNotSentError(ConnectionLostError):
    """The connection broke before the request was written to it: the server never saw it.

    Safe to retry (a producer retries such a send like a connect failure).
    """


class SendWindowFullError(TubeMQError):
    """``send_nowait`` found every slot of the send window (``max_in_flight_sends``) taken.

    Nothing was sent; await :meth:`~tubemq_aio.Producer.send` to wait for room instead.
    """


class RequestTimeoutError(TubeMQError, builtins.TimeoutError):
    """No response arrived within the request's timeout.

    The request may or may not have been processed by the server.
    """


class WriteTimeoutError(RequestTimeoutError):
    """The request's deadline passed while it waited for room to be written (the peer stopped
    reading, or every in-flight slot stayed busy) or for its connection to open: it was never
    sent, so it was not processed."""


class AssignmentTimeoutError(TubeMQError, builtins.TimeoutError):
    """``wait_for_assignment`` reached its deadline before the consumer held a partition
    (the Java ``isPartitionsReady`` wait returning false); also a builtin ``TimeoutError``."""


class FlushTimeoutError(TubeMQError, builtins.TimeoutError):
    """``Producer.flush(timeout=…)`` reached its deadline with sends of ``send_nowait`` still
    pending (they go on, each to its own deadline); also a builtin ``TimeoutError``."""


class SendOutcomeUnknownError(TubeMQError):
    """A send failed after its request was written: the message may or may not be stored.

    The original cause (a timeout or a lost connection) is chained as ``__cause__``. Resending
    can create a duplicate; not resending can lose the message.
    """


class TopicUnavailableError(TubeMQError):
    """The topic has no partition a producer may write to (unknown, not publishable, or all of
    its brokers gone) after waiting for the master's metadata."""


class ProtocolError(TubeMQError):
    """Bytes on the wire did not follow the TubeMQ protocol."""


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol does not allow (a bug or a bad argument)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that break the protocol; the connection must be closed."""


class FrameError(RemoteProtocolError):
    """An incoming frame is malformed (bad begin token, too many blocks, over the size cap)."""


class RemoteRpcError(TubeMQError):
    """The server answered with an RPC exception frame.

    Attributes:
        exception_name: the Java exception class name the server reported.
        remote_message: the exception text (TubeMQ calls the field ``stackTrace``).
        fatal: True when the response status was FATAL (request not understood at all).
    """

    #: Whether the call may succeed if sent again (possibly to another node).
    retriable: ClassVar[bool] = False

    def __init__(self, exception_name: str, remote_message: str, *, fatal: bool = False) -> None:
        super().__init__(
            f"{exception_name}: {remote_message}" if remote_message else exception_name
        )
        self.exception_name = exception_name
        self.remote_message = remote_message
        self.fatal = fatal


class StandbyMasterError(RemoteRpcError):
    """The master contacted is a standby; the call must go to another master address."""

    retriable = True


class ServerNotReadyError(RemoteRpcError):
    """The server's RPC service has not started yet."""

    retriable = True


class ServiceNotPublishedError(ServerNotReadyError):
    """The node's RPC server listens but has not published the called service or method yet.

    A node starting binds its port when it publishes its first service and registers each
    service before that service's methods, so for a moment it answers
    ``No service <s> found on the server`` or ``No method <m> in service <s> found on the
    server`` (a broker publishes its write service, then its read service). The request was
    not processed; like :class:`ServerNotReadyError` it may be sent again
    (docs/protocol/wire.md §3.1).
    """


class NoMasterServiceError(ServiceNotPublishedError):
    """An address given as a master answered a master call with ``No service 1 found on the
    server``: a TubeMQ node without the master service, most likely a broker's client port
    (8123 by default) where a master's belongs (8715 by default).

    A master publishes that service before it accepts calls, so sending again gets the same
    answer: not :attr:`retriable` (unlike its base class), and a master call fails with it at
    once when every configured master address answered so (other addresses are tried first).

    Attributes:
        address: the ``host:port`` that answered, when known.
    """

    retriable = False

    def __init__(
        self,
        exception_name: str,
        remote_message: str,
        *,
        fatal: bool = False,
        address: str | None = None,
    ) -> None:
        super().__init__(exception_name, remote_message, fatal=fatal)
        self.address = address
        where = f"{address} is" if address else "the address is"
        self.args = (
            f"{self.args[0]}: {where} a TubeMQ node without the master service, most likely a "
            "broker's client port (8123 by default); give a master's client port (8715 by "
            "default)",
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_no_master_service,
            (self.exception_name, self.remote_message, self.fatal, self.address),
        )


def _rebuild_no_master_service(
    exception_name: str, remote_message: str, fatal: bool, address: str | None
) -> NoMasterServiceError:
    """Unpickle a :class:`NoMasterServiceError` (its keyword arguments)."""
    return NoMasterServiceError(exception_name, remote_message, fatal=fatal, address=address)


class ServiceStoppingError(RemoteRpcError):
    """The server is shutting down."""

    retriable = True


# Exception simple names -> class. Matched by the part after the last '.', so every package
# spelling the server may use (org.apache.inlong.tubemq., com.apache.tubemq., com.tencent.tubemq.)
# maps the same way.
_REMOTE_ERROR_BY_SIMPLE_NAME: dict[str, type[RemoteRpcError]] = {
    "StandbyException": StandbyMasterError,
    "ServerNotReadyException": ServerNotReadyError,
    "ServiceStoppingException": ServiceStoppingError,
}


#: The texts a node's RPC dispatcher answers (as a plain ``java.lang.Exception``) for a service
#: or method it has not registered yet; nothing else raises them (docs/protocol/wire.md §3.1).
_NOT_PUBLISHED_TEXT = re.compile(
    r"No (?:service \d+|method \d+ in service \d+) found on the server"
)


#: What a TubeMQ node without the master service answers a master call (service 1): a broker.
NO_MASTER_SERVICE_TEXT = "No service 1 found on the server"


def remote_error_for(exception_name: str, remote_message: str, *, fatal: bool) -> RemoteRpcError:
    """Build the exception for an RPC exception frame.

    The class comes from the exception's simple name; a plain ``Exception`` whose text says the
    called service or method is not published (a node starting) becomes
    :class:`ServiceNotPublishedError`.

    Args:
        exception_name: the Java class name from ``RspExceptionBody.exceptionName``.
        remote_message: the text from ``RspExceptionBody.stackTrace``.
        fatal: whether the response status was FATAL.

    Returns:
        An instance of the most specific :class:`RemoteRpcError` subclass.
    """
    simple = exception_name.rsplit(".", 1)[-1]
    cls = _REMOTE_ERROR_BY_SIMPLE_NAME.get(simple, RemoteRpcError)
    if simple == "Exception" and _NOT_PUBLISHED_TEXT.fullmatch(remote_message):
        no_master = remote_message == NO_MASTER_SERVICE_TEXT
        cls = NoMasterServiceError if no_master else ServiceNotPublishedError
    return cls(exception_name, remote_message, fatal=fatal)


class ServerError(TubeMQError):
    """The server processed the request and answered with a TubeMQ error code.

    Attributes:
        err_code: the numeric TubeMQ error code (``TErrCodeConstants``).
        err_msg: the server's error text.
    """

    #: Whether sending the same request again (possibly elsewhere, after a pause) may succeed.
    retriable: ClassVar[bool] = False

    def __init__(self, err_code: int, err_msg: str) -> None:
        super().__init__(f"[{err_code}] {err_msg}")
        self.err_code = err_code
        self.err_msg = err_msg


class TopicNotDeployedError(TopicUnavailableError, ServerError):
    """The master says a topic is not deployed on the cluster (TubeMQ code 431): nothing to wait
    for; create the topic, or check its name.

    Raised by a producer publishing the topic (it asks the master when a topic has no writable
    partition) and by the ``start()`` of :class:`~tubemq_aio.Consumer` and
    :class:`~tubemq_aio.ClientBalancedConsumer` (the master refuses their register), in both
    cases at once rather than after a retry deadline.

    It is both a :class:`TopicUnavailableError` (what a producer raised for an unknown topic
    before it could tell) and a :class:`ServerError` with ``err_code`` 431 (what a consumer
    raised before), so ``except TopicUnavailableError`` and ``except ServerError`` with a check
    of ``err_code == 431`` keep working, and one ``except TopicNotDeployedError`` serves
    producers and consumers alike. Both parents derive from :class:`TubeMQError`: the hierarchy
    keeps one root.

    Args:
        topics: the topics the master does not know (a single name is taken as one topic).
        err_msg: the master's text, when it sent one; by default a text naming the topics.

    Attributes:
        topics: the topics the master does not know, in the order asked (a tuple).
        err_code: always 431 (``TOPIC_NOT_DEPLOYED``, docs/protocol/wire.md §8).
        err_msg: the master's text, or the default one.
    """

    #: TubeMQ's ``TOPIC_NOT_DEPLOYED`` code.
    CODE: ClassVar[int] = 431

    def __init__(self, topics: Iterable[str], err_msg: str = "") -> None:
        self.topics = (topics,) if isinstance(topics, str) else tuple(topics)
        names = ", ".join(repr(t) for t in self.topics)
        self.err_code = self.CODE
        self.err_msg = err_msg or f"topic {names} not deployed"
        # Not ServerError.__init__: the message names the topics and says what to do.
        TubeMQError.__init__(
            self,
            f"topic {names} is not deployed on this cluster (the master says so): create it "
            "first (for example with the master's web API), or check its name",
        )

    def __reduce__(self) -> tuple[type[TopicNotDeployedError], tuple[tuple[str, ...], str]]:
        return (type(self), (self.topics, self.err_msg))


class BadRequestError(ServerError):
    """400: the server found a parameter invalid."""


class ForbiddenError(ServerError):
    """403: topic unknown, closed or forbidden, partition out of range, or checksum mismatch."""


class MessageNotFoundError(ServerError):
    """404: no new message at the requested position (the consumer is caught up)."""

    retriable = True


class MessageMovedError(ServerError):
    """301: the requested offset is below the partition's minimum offset."""

    retriable = True


class PartitionOccupiedError(ServerError):
    """410: the partition is held by another consumer."""

    retriable = True


class NotRegisteredError(ServerError):
    """411: the server does not know this client (never registered or expired); re-register."""

    retriable = True


class AuthenticationError(ServerError):
    """415: authentication or token check failed."""


class ServerOverflowError(ServerError):
    """419: the broker's store refused the append (receive overflow)."""

    retriable = True


class ConsumeSpeedLimitedError(ServerError):
    """452: the broker throttles this consumer; wait before the next fetch."""

    retriable = True


class ServiceUnavailableError(ServerError):
    """503: the broker's read or write service is unavailable."""

    retriable = True


class InternalServerError(ServerError):
    """500: the server failed internally (for example a store failure)."""

    retriable = True


#: The one table from TubeMQ error code to exception class (codes: docs/protocol/wire.md §8).
#: 431 is not in it: its class needs the refused request's topics (:func:`server_error`).
SERVER_ERROR_CLASSES: dict[int, type[ServerError]] = {
    301: MessageMovedError,
    400: BadRequestError,
    403: ForbiddenError,
    404: MessageNotFoundError,
    410: PartitionOccupiedError,
    411: NotRegisteredError,
    412: PartitionOccupiedError,
    415: AuthenticationError,
    419: ServerOverflowError,
    452: ConsumeSpeedLimitedError,
    500: InternalServerError,
    503: ServiceUnavailableError,
}


def server_error(err_code: int, err_msg: str, *, topics: Sequence[str] = ()) -> ServerError:
    """Build the exception for a ``success=false`` response.

    Args:
        err_code: the TubeMQ error code from the response.
        err_msg: the error text from the response.
        topics: the topics the refused request named (a register's subscription); with code
            431 they make a :class:`TopicNotDeployedError`.

    Returns:
        For 431 with ``topics``: a :class:`TopicNotDeployedError` naming those of ``topics`` the
        text names (all of them when it names none; the master lists the missing ones,
        docs/protocol/consumer.md §1.3). Otherwise an instance of the class
        :data:`SERVER_ERROR_CLASSES` maps the code to, else :class:`ServerError`.
    """
    if err_code == TopicNotDeployedError.CODE and topics:
        return TopicNotDeployedError(_named_topics(err_msg, topics), err_msg)
    return SERVER_ERROR_CLASSES.get(err_code, ServerError)(err_code, err_msg)


#: What separates the names in the master's list of topics; a topic name holds none of these
#: (docs/protocol/consumer.md §1.3: ``Requested topic [[a, b]] not deployed!``).
_NAME_SEPARATORS = re.compile(r"[\s,\[\]]+")


def _named_topics(text: str, topics: Sequence[str]) -> list[str]:
    """Those of ``topics`` that ``text`` names as a whole word, in their order; all when none."""
    words = set(_NAME_SEPARATORS.split(text))
    named = [t for t in topics if t.strip() in words]
    return named or list(topics)


# ---- invalid arguments: the ConfigError family (fix the call) ----


class InvalidMessageError(ConfigError):
    """A message to send is invalid (bad body, topic, attribute, msgType/msgTime or size).

    Raised before anything is sent; also a ``ValueError`` (through :class:`ConfigError`).
    """


class MessageTooLargeError(InvalidMessageError):
    """A message to send (body plus attributes) exceeds the topic's max message size.

    Raised before anything is sent; send it smaller or raise the topic's limit.
    """


class ConsumerConfigError(ConfigError):
    """A consumer argument (group, topic, filter, offset, node id ...) is invalid."""


class BoundConsumeError(ConsumerConfigError):
    """A :class:`BoundConsume` argument is malformed (key, offset, session key or count)."""


class ClientBalanceConfigError(ConsumerConfigError):
    """A client-balance argument (source count, node id, offset) is invalid."""


class InvalidConfirmContextError(ConsumerConfigError):
    """The confirm context is malformed or its lease is gone (Java answers 400,
    docs/protocol/consumer.md §4.4)."""


class UnknownPartitionError(ConsumerConfigError):
    """The partition key is malformed, unknown in the topic metadata, or of a topic this
    consumer did not subscribe to (Java 404)."""


class PartitionAlreadyConnectedError(ConsumerConfigError):
    """The partition is already connected by this consumer (disconnect it first)."""


class PartitionNotConnectedError(ConsumerConfigError):
    """The partition is not connected by this consumer."""


class NoPartitionError(TopicUnavailableError, ConfigError):
    """A :class:`~tubemq_aio.Partitioner` was handed no partition to choose from.

    The producer checks for writable partitions first and raises
    :class:`TopicUnavailableError` itself; a custom partitioner raises this one (a
    :class:`TopicUnavailableError` too) when nothing it was given is usable. The Java client
    reports the same locally with errCode 444.
    """


class SourceOptionError(ConfigError):
    """A Spark option of the TubeMQ data source is missing or invalid (the message names it)."""


class SinkOptionError(ConfigError):
    """An option of the TubeMQ sink is unknown or invalid (the message names it)."""


class SinkSchemaError(ConfigError):
    """The DataFrame written to TubeMQ has a missing, unknown or badly typed column (named)."""


# ---- what the server sent is malformed: the ProtocolError family ----


class MalformedMetaError(RemoteProtocolError):
    """A metadata string from the server does not have the documented layout."""


class FlowRuleError(RemoteProtocolError):
    """The flow-control JSON from the master is malformed or breaks a rule constraint."""


class MessageDecodeError(ProtocolError):
    """A received payload cannot be split into attribute and body.

    Only that message is affected (the Java consumer drops it); the connection stays usable.
    """


# ---- states of the cluster or the data ----


class PartitionNotSubscribableError(TubeMQError):
    """The master says the group may not subscribe to this partition now (Java 422, or 421:
    a connect failed with 410/415 less than 5 s ago)."""


class DataLossError(TubeMQError):
    """A planned offset is no longer on the broker (``failOnDataLoss`` is true)."""


class AdminApiError(TubeMQError):
    """A call of the master's HTTP web API failed: unreachable, not JSON, or refused
    (``result: false``; the message carries the master's ``errMsg``)."""


class TDMsgError(TubeMQError, ValueError):
    """A TDMsg / InLongMsg payload is malformed, truncated, too large or unsupported.

    Also raised when a payload needs snappy decompression and the optional ``cramjam``
    dependency is not installed (the message then says how to install it).
    """
