"""One ``asyncio.Protocol`` per TCP connection: serial numbers, pending calls, coalesced writes.

Hot path (no per-request task or timer, docs/protocol/wire.md §1.5):

* send: take an in-flight slot (waiting, up to the call's own deadline, when none is free or the
  peer stopped reading), then ``start_parts`` (:class:`~tubemq_aio._io.registry.SendRegistry`,
  compiled when the accelerator is built): pick the next serial, register ``serial -> (future,
  deadline, timeout)``, append the frame header and the payload pieces to the tick's write list;
  the first frame of a tick schedules one ``_flush`` with ``loop.call_soon``, which joins the
  list and writes it once (at once instead when the tick's requests reach
  ``write_high_water``: the transport then pauses and later callers wait for room).
* receive: ``data_received`` feeds the frame decoder and hands the frames to ``resolve`` (the
  registry's), which pops each pending entry by serial and decodes the RPC envelope only
  (business bytes or a remote error); business messages are parsed by the awaiting caller.
  Unknown, late and duplicate serials are dropped and counted.
* deadlines: the client's :class:`~tubemq_aio._io.sweeper.DeadlineSweeper` calls :meth:`expire`
  when ``next_deadline`` (a lower bound of the earliest deadline) has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Protocol, cast

from tubemq_aio._io.decisions import MAX_SERIAL, read_threshold
from tubemq_aio._io.pending import PendingCalls
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.errors import (
    ClientClosedError,
    ConnectionLostError,
    FrameError,
    RemoteProtocolError,
    RemoteRpcError,
)
from tubemq_aio.protocol.framing import (
    FrameSplitter,
    new_frame_decoder,
)
from tubemq_aio.protocol.legacy_framing import LengthPrefixedDecoder

__all__ = ["Connection"]


#: Bytes read per socket read (asyncio's own read size), into one buffer reused per connection.
READ_SIZE = 256 * 1024


#: How an answer in HTTP begins: a status line, or (a server answering an HTTP/0.9-style
#: request, which is what a TubeMQ frame looks like to it) an HTML page without one.
_WEB_ANSWERS = (b"http/", b"<!doctype", b"<html")


class _SocketOptions(Protocol):
    """What the read coalescing needs of a transport's socket (asyncio's or uvloop's)."""

    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


class Connection(PendingCalls, asyncio.BufferedProtocol):
    """The client side of one TubeMQ TCP (or TLS) connection.

    Args:
        label: ``host:port`` (and ``/tls``) used in messages and ``repr``.
        settings: bounds and buffer limits.
        stats: counters shared with the owning pool.
        on_close: called once, after the connection is closed for any reason.
    """

    def __init__(
        self,
        label: str,
        settings: TransportSettings,
        stats: TransportStats | None = None,
        on_close: Callable[[Connection], object] | None = None,
    ) -> None:
        super().__init__(label, settings, stats)
        self._settings = settings
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        # Servers 1.1.0 and 1.2.0 put a length before each frame (docs/protocol/wire.md §1.7):
        # ``_legacy``, set by PendingCalls.
        self._decoder: FrameSplitter = (
            LengthPrefixedDecoder(settings.max_frame_bytes)
            if self._legacy
            else new_frame_decoder(max_frame_bytes=settings.max_frame_bytes)
        )
        #: Whether a request was ever written (a peer that drops the link after it, unanswered,
        #: may speak the other framing).
        self._wrote = False
        # The transport reads into this buffer (BufferedProtocol): no fresh 256 KB object per
        # read, whose pages the allocator hands back and faults in again under load. The frame
        # decoder copies what it keeps before the next read.
        self._rview: memoryview | None = None
        #: Whether a complete frame ever arrived (a link that dies before that counts as failed).
        self.answered = False
        #: Whether our side closed the link (close/abort), as opposed to the peer or a fault.
        self.closed_locally = False
        self._lost: asyncio.Future[None] = self._loop.create_future()
        # Read coalescing (decisions.read_threshold): the socket whose SO_RCVLOWAT is set (None
        # when the platform or the transport offers none), the mark it holds, the answer size
        # it is computed from, and whether the sweeper holds it at 1 until its next pass.
        self._coalescing = settings.read_coalescing
        self._lowat_socket: _SocketOptions | None = None
        self._lowat = 1
        self._answer_bytes = 0
        self._lowat_held = False

    # ---- state -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        idle = max(0.0, self._clock() - self.last_activity)
        return (
            f"<Connection {self.label} in_flight={len(self._pending)} idle={idle:.1f}s "
            f"paused={self._paused} closed={self._closed is not None}>"
        )

    # ---- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport, set TCP_NODELAY and the write buffer limits."""
        # uvloop's transports are not asyncio.Transport subclasses; they implement its interface.
        self._transport = transport = cast(asyncio.Transport, transport)
        self.last_activity = self._clock()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._coalescing > 0 and hasattr(socket, "SO_RCVLOWAT"):
                self._lowat_socket = sock
        transport.set_write_buffer_limits(
            high=self._settings.write_high_water, low=self._settings.write_low_water
        )
        self.stats.connections_opened += 1

    def get_buffer(self, sizehint: int) -> memoryview:
        """The buffer the transport reads into (the same one every time)."""
        if self._rview is None:
            self._rview = memoryview(bytearray(READ_SIZE))
        return self._rview

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the buffer: decode them."""
        assert self._rview is not None
        self.data_received(self._rview[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """Decode complete frames and resolve the calls they answer."""
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            self._fail(self._http_hint(exc, data))
            return
        self.last_activity = self._clock()
        if frames:
            self.answered = True
        failure = self.resolve(frames)
        if failure is None:
            if self._lowat_socket is not None:
                self._coalesce_reads(len(data), len(frames))
            return
        if isinstance(failure, RemoteRpcError):
            # The Java client closes a link that delivered an IOException-type answer (§3.2).
            failure = ConnectionLostError(
                f"connection to {self.label} closed after the server answered "
                f"{failure.exception_name}; the request may have been processed"
            )
        self._fail(failure)

    def eof_received(self) -> bool | None:
        """The server closed its side: close ours too (``connection_lost`` follows)."""
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail every pending call with :class:`ConnectionLostError` and notify the owner."""
        self._transport = None
        if self._closed is None:
            reason = f": {exc}" if exc is not None else ""
            hint = self._framing_hint()
            self._mark_closed(
                lambda: ConnectionLostError(
                    f"connection to {self.label} lost{reason}; "
                    f"the request may or may not have been processed{hint}"
                )
            )
        if not self._lost.done():
            self._lost.set_result(None)
        self.stats.connections_closed += 1
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close(self)

    # ---- calls -------------------------------------------------------------------------------

    async def call(self, payload: bytes, timeout: float, *, raw: bool = False) -> bytes:
        """Send a request and wait for its answer.

        Args:
            payload: the RPC envelope (``encode_request`` output).
            timeout: seconds to wait for the answer.
            raw: hand a SUCCESS answer over whole, as a plain SUCCESS envelope (the business
                bytes are ``payload[start:end]`` of
                :func:`~tubemq_aio.protocol.rpc.success_bounds`), sparing a copy of a large
                answer; an error answer is raised (or closes the connection) as without it.

        Returns:
            The business response bytes (with ``raw``: the whole response payload).

        ``timeout`` bounds the whole call: the wait for room (an in-flight slot, a write buffer
        the peer drains) and the wait for the answer.

        Raises:
            RemoteRpcError: the server answered with an exception frame.
            WriteTimeoutError: no room to send within ``timeout`` (the request was not sent).
            RequestTimeoutError: no answer within ``timeout``.
            RequestNotSentError: the connection was lost before the request was written.
            ConnectionLostError: the connection broke while waiting for the answer.
            ClientClosedError: the connection was closed by its owner.
            RemoteProtocolError: the answer could not be decoded (the connection is closed).
        """
        _, serial, fut = await self.start_when_room(payload, timeout)
        if raw:
            self._raw.add(serial)  # before any answer can arrive: no await since the write
        try:
            return await fut
        except asyncio.CancelledError:
            self.abandon(serial)
            raise

    async def start_when_room(
        self, payload: bytes, timeout: float
    ) -> tuple[Connection, int, asyncio.Future[bytes]]:
        """:meth:`start`, waiting for room first (behind the callers already waiting) instead
        of giving up; the wait and the answer share one deadline, ``timeout`` from now, as in
        :meth:`call`. Returns what :meth:`start` does.

        Raises:
            WriteTimeoutError: no room within ``timeout`` (not sent).
            RequestNotSentError: the connection was lost meanwhile (not sent).
            ClientClosedError: the connection was closed by its owner (not sent).
        """
        deadline = self._clock() + timeout
        if (
            self._closed is not None
            or self._paused
            or len(self._pending) >= self._max_in_flight
            or self._room_waiters
        ):
            await self._wait_to_send(deadline, timeout)
        started = self.start_parts((payload,), len(payload), timeout, deadline)
        assert started is not None  # given a deadline, it always sends
        return started

    def start(
        self, payload: bytes, timeout: float
    ) -> tuple[Connection, int, asyncio.Future[bytes]] | None:
        """Send a request now if there is room, without waiting for anything (the hot path).

        Args:
            payload: the RPC envelope (``encode_request`` output).
            timeout: seconds to wait for the answer.

        Returns:
            ``(self, serial, future)`` (the shape of
            :meth:`RpcClient.start_parts <tubemq_aio._io.rpc_client.RpcClient.start_parts>`,
            which hands it on as is): the future gets the business response bytes or the
            error :meth:`call` would raise; a caller that stops waiting for it must call
            :meth:`abandon` with the serial. ``None`` when the request would have to wait for
            room (or the connection is closed): nothing was sent, use :meth:`call`.
        """
        return self.start_parts((payload,), len(payload), timeout)

    def abandon(self, serial: int) -> None:
        """Forget the pending call ``serial`` whose caller stopped waiting (cancelled)."""
        if self._pending.pop(serial, None) is not None:
            self._raw.discard(serial)
            self.stats.cancelled += 1
            if self._room_waiters:
                self._wake_room()

    # ---- deadlines and closing ---------------------------------------------------------------

    async def close(self) -> None:
        """Close gracefully: fail pending calls with :class:`ClientClosedError`, flush, disconnect.

        Waits up to ``close_timeout`` for queued bytes to leave, then aborts.
        """
        self.begin_close()
        if not self._lost.done():
            try:
                async with asyncio.timeout(self._settings.close_timeout):
                    await asyncio.shield(self._lost)
            except TimeoutError:
                self.abort()
                await self._lost

    def begin_close(self) -> None:
        """Start :meth:`close` without waiting: from now on no call is accepted
        (:attr:`is_closed`), pending calls fail, queued bytes are flushed and the transport
        closes."""
        if self._closed is None:
            self.closed_locally = True
            self._mark_closed(lambda: ClientClosedError(f"connection to {self.label} was closed"))
            transport = self._transport
            if transport is not None:
                self._flush()
                transport.close()

    def abort(self) -> None:
        """Close at once, dropping unsent bytes; pending calls fail with ClientClosedError."""
        if self._closed is None:
            self.closed_locally = True
        self._mark_closed(lambda: ClientClosedError(f"connection to {self.label} was closed"))
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the transport has reported the connection lost."""
        await asyncio.shield(self._lost)

    # ---- internals ---------------------------------------------------------------------------

    def _framing_hint(self) -> str:
        # A server of the other framing never answers: a 1.1.0/1.2.0 one reads our begin token
        # as a 4 GiB length and drops every later byte, any other release closes the link on a
        # prefixed frame (docs/protocol/wire.md §1.7).
        if self.answered or not self._wrote:
            return ""
        if self._legacy:
            return (
                "; the server never answered on this connection: framing='legacy-length' is "
                "only for TubeMQ servers 1.1.0 and 1.2.0, other releases need 'standard'"
            )
        # A TLS listener closes a link that does not open with a TLS handshake just as silently.
        tls = ""
        if self._settings.ssl_context is None:
            tls = "; if this is a TLS port (a master's tlsPort, 8716 by default), connect with TLS"
        return (
            "; the server never answered on this connection: if it runs TubeMQ 1.1.0 or "
            f"1.2.0, connect with framing='legacy-length'{tls}"
        )

    def _http_hint(self, exc: FrameError, data: bytes | memoryview) -> FrameError:
        # An easy mistake: the master's web port (webPort, 8080) given for its client port.
        if self.answered:
            return exc
        if bytes(data[:9]).lower().startswith(_WEB_ANSWERS):
            return FrameError(
                f"{exc}; {self.label} answered in HTTP or HTML: it is a web port (such as a "
                "master's web API, 8080 by default), not a TubeMQ client port (a master's port, "
                "8715 by default)"
            )
        # Another text protocol's port (SSH, Redis, SMTP): its first line says whose.
        line = bytes(data[:80]).split(b"\n", 1)[0].rstrip(b"\r")
        if len(line) < 3 or not all(32 <= c < 127 for c in line):
            return exc
        return FrameError(
            f"{exc}; {self.label} answered {line.decode()!r}: it is another service's port, "
            "not a TubeMQ client port (a master's port, 8715 by default)"
        )

    def silence_hint(self) -> str:
        """The framing hint for a call that timed out on a connection that never answered."""
        return self._framing_hint()

    def expire(self, now: float) -> None:
        """Fail the calls whose deadline has passed (:meth:`PendingCalls.expire`), but first
        make sure their answers are not waiting unread behind the read threshold: with a mark
        above 1 and a call past due, lower it to 1 and look again on the sweeper's next pass
        (the loop reads what the socket holds in between)."""
        if self._lowat > 1 and self.any_expired(now):
            self._set_lowat(1)
            self._lowat_held = True
            self.next_deadline = now
            return
        self._lowat_held = False
        super().expire(now)

    def _coalesce_reads(self, nbytes: int, frames: int) -> None:
        """After a read of ``nbytes`` that completed ``frames``: the socket's read threshold for
        the answers still owed."""
        if self._lowat_held or self._closed is not None:
            return
        if frames:
            size = nbytes // frames
            if self._answer_bytes == 0 or size < self._answer_bytes:
                self._answer_bytes = size
        owed = len(self._pending) - (self._serial - self._written) % MAX_SERIAL
        mark = read_threshold(owed, self._answer_bytes, self._coalescing)
        if mark != self._lowat:
            self._set_lowat(mark)

    def _set_lowat(self, mark: int) -> None:
        self._lowat = mark
        if self._lowat_socket is None:
            return
        try:
            self._lowat_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
        except (OSError, AttributeError):  # refused: read every answer as it comes
            self._lowat_socket = None
            self._lowat = 1

    def _flush(self) -> None:
        buf = self._wbuf
        if not buf:
            return
        self._wbuf = []
        transport = self._transport
        if transport is not None and not transport.is_closing():
            self._wrote = True
            # One join of the tick's frames (header and payload pieces): asyncio's writelines
            # joins too, uvloop's would queue every piece separately.
            transport.write(b"".join(buf))
            self.last_activity = self._clock()
            if not transport.is_closing():  # a write the socket refused closes the transport
                self._written = self._serial  # every request registered so far is written

    def _fail(self, exc: Exception) -> None:
        """Close the connection because of ``exc`` (a protocol error or an IOException answer)."""
        text = str(exc)
        kind: type[Exception] = (
            type(exc) if isinstance(exc, RemoteProtocolError) else ConnectionLostError
        )

        def make() -> BaseException:
            error = kind(text)
            error.__cause__ = exc
            return error

        self._mark_closed(make)
        if self._transport is not None:
            self._transport.abort()
