"""The RPC side of the fake cluster: one loopback TCP server per node, and injectable faults.

A node decodes request frames with our own sans-I/O codec (:mod:`tubemq_aio.protocol.framing`,
:mod:`tubemq_aio.protocol.rpc`), hands each request to a handler that returns the serialized
business response, and frames the answer with the request's serial number. Before calling the
handler it asks the cluster's :class:`FaultPlan` whether a fault was injected for that method.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from google.protobuf.message import DecodeError, Message

from tubemq_aio.errors import TubeMQError
from tubemq_aio.protocol.framing import BLOCK_SIZE, FrameDecoder, FrameSplitter, encode_frame
from tubemq_aio.protocol.legacy_framing import LENGTH_PREFIX, Framing, LengthPrefixedDecoder
from tubemq_aio.protocol.rpc import RpcRequest, decode_request, encode_exception, encode_success
from tubemq_aio.testing._port_hold import PortHold
from tubemq_aio.testing._reset import reset_transport

__all__ = ["Fault", "FaultPlan", "Injection", "RpcNode", "failure_response"]

log = logging.getLogger("tubemq_aio.testing.fake")

FaultKind = Literal["error", "delay", "drop", "reset", "exception", "late"]
#: A request handler: the decoded request in, the serialized business response out.
Handler = Callable[[RpcRequest], bytes]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_PROTOBUF_ERROR = "com.google.protobuf.InvalidProtocolBufferException"
# What a real node's RPC dispatcher answers for a service it does not serve: a plain Exception
# (docs/protocol/wire.md §3.1).
_NO_SERVICE = "java.lang.Exception"


@dataclass(frozen=True, slots=True)
class Fault:
    """What a node does with a request instead of (or before) answering it normally.

    Build one with the class methods; pass it to :meth:`FakeCluster.inject`.

    Attributes:
        kind: ``error``, ``delay``, ``drop``, ``reset``, ``exception`` or ``late``.
        code: the TubeMQ error code of an ``error`` fault.
        message: the error text of an ``error`` or ``exception`` fault.
        seconds: how long a ``delay`` fault holds the (normal) answer back, or how long a
            ``late`` fault holds the request before executing it (None: until
            :meth:`FakeCluster.release_late`).
        exception_name: the Java exception class name of an ``exception`` fault.
        fatal: whether an ``exception`` fault answers with status FATAL instead of ERROR.
    """

    kind: FaultKind
    code: int = 0
    message: str = ""
    seconds: float | None = 0.0
    exception_name: str = ""
    fatal: bool = False

    @classmethod
    def error(cls, code: int, message: str = "injected by FakeCluster") -> Fault:
        """Answer ``success=false`` with TubeMQ error ``code`` (e.g. 503, 411, 452).

        Raises:
            ValueError: ``code`` is not an int (a bool is not) of 32 bits, or ``message`` not a
                string.
        """
        if type(code) is not int or not isinstance(message, str):
            raise ValueError(f"an error fault takes an int code and a str message, got {code!r}")
        if not _INT32_MIN <= code <= _INT32_MAX:  # errCode is an int32 on the wire
            raise ValueError(f"an error fault's code must fit in 32 bits, got {code}")
        return cls("error", code=code, message=message)

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Answer normally, ``seconds`` later.

        Raises:
            ValueError: ``seconds`` is not a finite number >= 0 (a bool is not one; for an
                answer that never comes, use :meth:`no_answer`).
        """
        return cls("delay", seconds=_hold_seconds("a delay", seconds))

    @classmethod
    def late(cls, seconds: float | None = None) -> Fault:
        """Execute the request late: the node takes it and runs it only ``seconds`` after it
        arrived, or when the test calls :meth:`FakeCluster.release_late` (None, the default).

        It runs then whatever became of the client meanwhile (its deadline passed, its
        connection was closed or aborted, another connection of its group registered): a
        real broker runs a request it has read whenever a thread gets to it, and requests of
        different connections are not ordered there (docs/protocol/consumer.md §4.2). The
        answer goes back only if the request's connection is still open. A node stopped
        meanwhile (:meth:`FakeCluster.stop_broker`) forgets the requests it held, as a killed
        process does.

        Raises:
            ValueError: ``seconds`` is not None nor a finite number >= 0.
        """
        held = None if seconds is None else _hold_seconds("a late request's hold", seconds)
        return cls("late", seconds=held)

    @classmethod
    def no_answer(cls) -> Fault:
        """Swallow the request: no answer ever comes (the connection stays open)."""
        return cls("drop")

    @classmethod
    def reset(cls) -> Fault:
        """Abort the connection (TCP reset) instead of answering."""
        return cls("reset")

    @classmethod
    def exception(cls, name: str, message: str = "", *, fatal: bool = False) -> Fault:
        """Answer with an RPC exception frame, e.g. the master's ``StandbyException``.

        Raises:
            ValueError: ``name`` is not a non-empty str, ``message`` not a str or ``fatal`` not
                a bool (each would break the answer's encoding when a request meets the
                fault, resetting the connection instead).
        """
        if not isinstance(name, str) or not name or not isinstance(message, str):
            raise ValueError(
                f"an exception fault takes a non-empty str name and a str message, got {name!r}"
            )
        if not isinstance(fatal, bool):
            raise ValueError(f"an exception fault's fatal must be True or False, got {fatal!r}")
        return cls("exception", message=message, exception_name=name, fatal=fatal)


def _hold_seconds(what: str, seconds: object) -> float:
    """``seconds`` of a delay or a late hold, checked: a finite number >= 0 (not a bool)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {seconds!r}")
    if not 0 <= seconds < math.inf:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {seconds!r}")
    return float(seconds)


@dataclass(slots=True)
class Injection:
    """One injected fault rule; returned by :meth:`FakeCluster.inject`.

    Attributes:
        method: the RPC method id it applies to.
        fault: what happens.
        node: the node name it applies to (``"master"``, ``"broker1"``...), or None for any.
        remaining: how many more requests it applies to (None: every one until removed).
        hits: how many requests it applied to so far.
    """

    method: int
    fault: Fault
    node: str | None = None
    remaining: int | None = 1
    hits: int = 0


@dataclass(slots=True)
class FaultPlan:
    """The injected fault rules of one cluster, consulted in order for every request."""

    rules: list[Injection] = field(default_factory=list)

    def add(self, rule: Injection) -> Injection:
        """Append ``rule`` and return it."""
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule."""
        self.rules.clear()

    def take(self, node: str, method: int) -> Fault | None:
        """The fault for this request, if a rule matches (consuming one of its uses)."""
        for rule in self.rules:
            if rule.method != method or (rule.node is not None and rule.node != node):
                continue
            rule.hits += 1
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.rules.remove(rule)
            return rule.fault
        return None


def failure_response(cls: type[Message], code: int, message: str) -> bytes:
    """Serialize a ``success=false`` answer of type ``cls`` carrying error ``code``.

    Every other required field gets its zero value (``-1`` for ``brokerCheckSum``), so the
    answer parses like a real server's refusal.
    """
    msg = cls()
    values: dict[str, Any] = {"success": False, "errCode": code, "errMsg": message}
    for fd in cls.DESCRIPTOR.fields:
        if fd.name in values:
            setattr(msg, fd.name, values[fd.name])
        elif fd.name == "brokerCheckSum":
            setattr(msg, fd.name, -1)
        elif fd.is_required and fd.type != fd.TYPE_MESSAGE:
            setattr(msg, fd.name, fd.default_value)
    return msg.SerializeToString()


class _NodeProtocol(asyncio.Protocol):
    def __init__(self, node: RpcNode) -> None:
        self.node = node
        self.legacy = node.framing == "legacy-length"
        self.decoder: FrameSplitter = LengthPrefixedDecoder() if self.legacy else FrameDecoder()
        self.deaf = False
        self.transport: asyncio.Transport | None = None
        self.timers: set[asyncio.TimerHandle] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.node.connections.add(self)
        self.node.accepted += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.node.connections.discard(self)
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.deaf:
            return
        try:
            frames = self.decoder.feed(data)
        except TubeMQError:
            # A real server answers nothing more on a stream it cannot frame and leaves the
            # connection open: 1.1.0/1.2.0 read a bare frame's begin token as a 4 GiB length and
            # drop every byte after it, 2.4.0 fails the begin-token check of every unit after a
            # length prefix (docs/protocol/wire.md §1.7).
            self.deaf = True
            return
        for frame in frames:
            self._handle(frame.serial_no, frame.payload)

    def abort(self) -> None:
        if self.transport is not None:
            reset_transport(self.transport)

    def _handle(self, serial: int, payload: bytes) -> None:
        try:
            request = decode_request(payload)
        except TubeMQError:
            self.abort()
            return
        node = self.node
        node.requests[request.method] = node.requests.get(request.method, 0) + 1
        fault = node.plan.take(node.name, request.method)
        if fault is not None and fault.kind == "late":
            node.hold(_LateRequest(self, serial, request), fault.seconds)
            return
        if fault is not None and fault.kind != "delay":
            self._apply(serial, request, fault)
            return
        answer = node.answer(request)
        if fault is None or not fault.seconds:
            self._write(serial, answer)
            return
        loop = asyncio.get_running_loop()
        holder: list[asyncio.TimerHandle] = []
        holder.append(loop.call_later(fault.seconds, self._delayed, holder, serial, answer))
        self.timers.add(holder[0])

    def _delayed(self, holder: list[asyncio.TimerHandle], serial: int, answer: bytes) -> None:
        self.timers.discard(holder[0])
        self._write(serial, answer)

    def _apply(self, serial: int, request: RpcRequest, fault: Fault) -> None:
        if fault.kind == "reset":
            self.abort()
        elif fault.kind == "error":
            self._write(serial, self.node.refuse(request, fault.code, fault.message))
        elif fault.kind == "exception":
            name, text = fault.exception_name, fault.message
            self._write(serial, encode_exception(name, text, fatal=fault.fatal))
        # "drop": nothing at all

    def write(self, serial: int, payload: bytes) -> None:
        """Send the answer ``payload`` to request ``serial``, if the connection is open."""
        self._write(serial, payload)

    def _write(self, serial: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            frame = encode_frame(serial, payload)
            if self.legacy:
                # As those servers do: the last block's whole 8 KiB buffer follows its true
                # length, and the prefix counts it (docs/protocol/wire.md §1.7).
                frame += bytes(-len(payload) % BLOCK_SIZE)
                frame = LENGTH_PREFIX.pack(len(frame)) + frame
            self.transport.write(frame)


@dataclass(slots=True)
class _LateRequest:
    """A request a ``late`` fault holds: where it came from, to answer it once it ran."""

    conn: _NodeProtocol
    serial: int
    request: RpcRequest
    timer: asyncio.TimerHandle | None = None


class RpcNode:
    """One fake server (master or broker) listening on a free loopback port.

    Args:
        name: ``"master"`` or ``"broker<id>"``; fault rules may target it by this name.
        handlers: method id -> handler.
        responses: method id -> response message class (for injected ``error`` faults).
        plan: the cluster's fault rules.
    """

    def __init__(
        self,
        name: str,
        handlers: dict[int, Handler],
        responses: dict[int, type[Message]],
        plan: FaultPlan,
    ) -> None:
        self.name = name
        self.handlers = handlers
        self.responses = responses
        self.plan = plan
        self.connections: set[_NodeProtocol] = set()
        self.requests: dict[int, int] = {}
        #: Requests a ``late`` fault holds, in arrival order.
        self.held: list[_LateRequest] = []
        self.accepted = 0
        #: How frames are delimited on this node's connections (set before :meth:`start`).
        self.framing: Framing = "standard"
        self.host = "127.0.0.1"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._hold = PortHold()

    @property
    def addr(self) -> str:
        """``host:port`` of the listening socket."""
        return f"{self.host}:{self.port}"

    async def start(self, port: int = 0) -> None:
        """Listen on ``port`` (0: a free one; the port a ``stop(hold_port=True)`` kept is
        listened on with the socket that kept it)."""
        loop = asyncio.get_running_loop()
        server = await self._hold.listen(
            port, lambda held: loop.create_server(lambda: _NodeProtocol(self), sock=held)
        ) or await loop.create_server(lambda: _NodeProtocol(self), self.host, port)
        self._server = server
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self, *, hold_port: bool = False) -> None:
        """Stop listening and abort every connection (clients see a reset); the requests held
        by ``late`` faults are forgotten, as a killed process forgets them.

        Args:
            hold_port: keep the port bound (not listening: connects are refused) until the
                next :meth:`start` on it, so that no other socket is given it meanwhile (a
                restart on the old port); False (default) frees it.
        """
        if self._server is not None:
            self._server.close()  # the listening socket closes now: hold its port at once
            if hold_port:
                self._hold.hold(self.host, self.port)
        if not hold_port:
            self._hold.release()
        for late in self.held:
            if late.timer is not None:
                late.timer.cancel()
        self.held.clear()
        self.drop_connections()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def running(self) -> bool:
        """Whether the node accepts connections."""
        return self._server is not None

    def drop_connections(self) -> None:
        """Abort every open connection of this node."""
        for conn in list(self.connections):
            conn.abort()

    def hold(self, late: _LateRequest, seconds: float | None) -> None:
        """Keep ``late`` to run it ``seconds`` from now (None: at :meth:`release_late`)."""
        self.held.append(late)
        if seconds is not None:
            late.timer = asyncio.get_running_loop().call_later(seconds, self._run_late, late)

    def release_late(self, method: int | None = None) -> int:
        """Run now, in arrival order, the held requests of ``method`` (None: every one).

        Returns:
            How many ran.
        """
        chosen = [late for late in self.held if method is None or late.request.method == method]
        for late in chosen:
            self._run_late(late)
        return len(chosen)

    def _run_late(self, late: _LateRequest) -> None:
        if late not in self.held:
            return
        self.held.remove(late)
        if late.timer is not None:
            late.timer.cancel()
        late.conn.write(late.serial, self.answer(late.request))

    def answer(self, request: RpcRequest) -> bytes:
        """The response payload for ``request`` (success, or an exception frame)."""
        handler = self.handlers.get(request.method)
        if handler is None:
            return _not_served(request)
        try:
            return encode_success(request.method, handler(request))
        except DecodeError as exc:
            # What a Java server answers to a body it cannot parse (docs/protocol/wire.md §1.6).
            return encode_exception(_PROTOBUF_ERROR, str(exc), fatal=True)

    def refuse(self, request: RpcRequest, code: int, message: str) -> bytes:
        """The response payload refusing ``request`` with error ``code``."""
        cls = self.responses.get(request.method)
        if cls is None:
            return _not_served(request)
        return encode_success(request.method, failure_response(cls, code, message))


def _not_served(request: RpcRequest) -> bytes:
    return encode_exception(_NO_SERVICE, f"No service {request.service_type} found on the server")
