"""A connection's registration state for calls: serials, the pending table, the tick's writes,
and the answers that resolve them.

:class:`SendRegistry` is the pure-Python reference; the accelerator has a typed twin of the same
name (``_speedups/_registry.pxi``) with the same fields and the same two hot methods, compared
against this one in ``tests/unit/test_speedups_registry.py``.
:class:`~tubemq_aio._io.pending.PendingCalls` is built on whichever is in use
(:data:`RegistryBase`), so everything else reads and writes the same fields either way.

* :meth:`SendRegistry.start_parts`: take the next serial, register ``serial -> (future,
  deadline, timeout)``, append the frame header and the payload pieces to the tick's write list
  (the first frame of a tick schedules one ``_flush``). No timer per call: deadlines are kept
  for the sweeper (``next_deadline``, :meth:`PendingCalls.expire`).
* :meth:`SendRegistry.resolve`: the frames of one read resolve their calls' futures; a plain
  SUCCESS answer's business bytes are cut out directly, anything else goes to
  :func:`settle_other`. The compiled twin, given the futures of a compiled ``AnswerFutures``
  (see :func:`~tubemq_aio._io.pending.future_factory`), wakes the callers of one read in one
  loop callback.

The subclass provides ``_flush`` (write the tick's frames) and the rest of the connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Self

from tubemq_aio._io.decisions import MAX_SERIAL, closes_connection
from tubemq_aio._io.stats import TransportStats
from tubemq_aio.accelerator import twin_or
from tubemq_aio.errors import RemoteProtocolError, RemoteRpcError
from tubemq_aio.protocol.framing import BEGIN_TOKEN, BLOCK_SIZE, ONE_BLOCK_HEADER, encode_frame
from tubemq_aio.protocol.legacy_framing import length_prefix
from tubemq_aio.protocol.rpc import encode_success, response_decoder, success_bounds

__all__ = [
    "RegistryBase",
    "SendRegistry",
    "frame_other",
    "plain_success",
    "settle_other",
]

# (future, deadline, timeout): a tuple is the cheapest record to build per request.
_Pending = tuple["asyncio.Future[bytes]", float, float]

_pack_header = ONE_BLOCK_HEADER.pack
_ONE_BLOCK_HEADER_SIZE = ONE_BLOCK_HEADER.size


def plain_success(payload: bytes) -> bytes | None:
    """The business bytes of a plain SUCCESS envelope (every send's and commit's answer), or
    None for any other payload (decoded the general way): the bytes ``response_decoder``
    returns for it (see :func:`~tubemq_aio.protocol.rpc.success_bounds`). The compiled twin
    cuts out only the one-byte-lengths shape and leaves the rest to :func:`settle_other`,
    which gives the same bytes.
    """
    bounds = success_bounds(payload)
    return None if bounds is None else payload[bounds[0] : bounds[1]]


def frame_other(serial: int, parts: Sequence[bytes], size: int, legacy: bool) -> Sequence[bytes]:
    """The pieces to write for a request that is not a one-block standard frame: a payload of
    more than one block (or an empty one, which raises), or any frame of the legacy framing.

    Raises:
        LocalProtocolError: an empty or oversized payload.
    """
    if 0 < size <= BLOCK_SIZE:
        header = _pack_header(BEGIN_TOKEN, serial, 1, size)
        if legacy:
            header = length_prefix(_ONE_BLOCK_HEADER_SIZE + size) + header
        return (header, *parts)
    frame = encode_frame(serial, b"".join(parts))
    return (length_prefix(len(frame)), frame) if legacy else (frame,)


def settle_other(
    label: str, stats: TransportStats, payload: bytes, fut: asyncio.Future[bytes], whole: bool
) -> RemoteRpcError | None:
    """Resolve ``fut`` with an answer that is not a plain SUCCESS with one-byte lengths.

    Args:
        label: the connection's ``host:port``.
        stats: counts a dropped answer (its future already done).
        payload: the response payload.
        fut: the call's future.
        whole: the caller asked for the whole envelope (``raw``): a SUCCESS in another layout
            is re-wrapped as a plain one.

    Returns:
        The remote error when it is one that closes the connection (an IOException-type
        answer, docs/protocol/wire.md §3.2), else None.

    Raises:
        RemoteProtocolError: the payload could not be decoded (``fut`` got it too); the
            connection must be closed with it.
    """
    try:
        result = response_decoder(payload)
    except Exception as exc:
        error = (
            exc
            if isinstance(exc, RemoteProtocolError)
            else RemoteProtocolError(f"undecodable response from {label}: {exc!r}")
        )
        if not fut.done():
            fut.set_exception(error)
        raise error from None
    if isinstance(result, bytes):
        if fut.done():
            stats.dropped_responses += 1
        else:
            # A SUCCESS in another layout (no server writes one): re-wrapped in the plain one.
            fut.set_result(encode_success(0, result) if whole else result)
        return None
    if fut.done():
        stats.dropped_responses += 1
    else:
        fut.set_exception(result)
    if isinstance(result, RemoteRpcError) and closes_connection(result.exception_name):
        return result
    return None


class SendRegistry:
    """Serials, pending calls and the tick's writes of one connection (pure reference).

    The fields are set by the owner (:class:`~tubemq_aio._io.pending.PendingCalls`), never
    here, so the compiled twin and this class have the same layout to fill.
    """

    label: str
    stats: TransportStats
    #: A loop time not after the earliest pending deadline; the sweeper's cheap test.
    next_deadline: float
    #: Loop time of the latest bytes sent or received (for idle reaping).
    last_activity: float
    _loop: asyncio.AbstractEventLoop
    _new_future: Callable[[], asyncio.Future[bytes]]
    _clock: Callable[[], float]
    _pending: dict[int, _Pending]
    _raw: set[int]
    _serial: int
    _written: int
    _max_in_flight: int
    _room_waiters: deque[asyncio.Future[None]]
    _paused: bool
    _closed: BaseException | None
    _legacy: bool
    _wbuf: list[bytes]
    #: Bytes of the requests queued this tick; once they reach ``_write_high`` (the
    #: transport's high-water mark) the tick's frames are written at once, so the transport
    #: pauses and later callers wait for room instead of queueing past the mark.
    _tick_bytes: int
    _write_high: int
    #: Frames a request that is not a one-block standard frame: :func:`frame_other`.
    _frame_other: Callable[[int, Sequence[bytes], int, bool], Sequence[bytes]]

    def _flush(self) -> None:
        """Write the tick's frames (the connection's; nothing to write to here)."""
        self._wbuf = []

    def _wake_room(self) -> None:
        """Let the first caller still waiting for an in-flight slot go on."""
        waiters = self._room_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def start_parts(
        self, parts: Sequence[bytes], size: int, timeout: float, deadline: float | None = None
    ) -> tuple[Self, int, asyncio.Future[bytes]] | None:
        """Register a request and queue its frame for this tick's write, if there is room.

        Args:
            parts: the request payload (RPC envelope included) in pieces, joined when written.
            size: their total length.
            timeout: seconds to wait for the answer (kept for the timeout's message).
            deadline: the loop time the answer is due, given only by a caller that has just
                waited for room: it registers without looking for room again, ahead of the
                callers still queued. Without it the answer is due ``timeout`` from now.

        Returns:
            ``(self, serial, future)``, or None when there is no room now (closed, writing
            paused, every in-flight slot busy, or callers already waiting): nothing was done.

        Raises:
            LocalProtocolError: an empty or oversized payload (nothing is registered).
        """
        pending = self._pending
        if deadline is None:
            if (
                self._closed is not None
                or self._paused
                or len(pending) >= self._max_in_flight
                or self._room_waiters
            ):
                return None
            deadline = self._clock() + timeout
        serial = self._serial + 1 if self._serial < MAX_SERIAL else 1
        while serial in pending:  # only possible after a wrap with an ancient call pending
            serial = serial + 1 if serial < MAX_SERIAL else 1
        if 0 < size <= BLOCK_SIZE and not self._legacy:
            header = _pack_header(BEGIN_TOKEN, serial, 1, size)
        else:  # raises for an empty or oversized payload, before anything is registered
            parts = self._frame_other(serial, parts, size, self._legacy)
            header = b""
        self._serial = serial
        fut: asyncio.Future[bytes] = self._new_future()
        pending[serial] = (fut, deadline, timeout)
        if deadline < self.next_deadline:
            self.next_deadline = deadline
        self.stats.requests_sent += 1
        buf = self._wbuf
        if not buf:
            self._loop.call_soon(self._flush)
            self._tick_bytes = 0
        if header:
            buf.append(header)
        buf.extend(parts)
        self._tick_bytes += size
        if self._tick_bytes >= self._write_high:
            self._flush()
        return self, serial, fut

    def resolve(self, frames: Sequence[tuple[int, bytes]]) -> Exception | None:
        """Resolve the calls the ``(serial, payload)`` frames of one read answer.

        Unknown, late and duplicate serials are dropped and counted; every answered call frees
        its in-flight slot (waking a caller waiting for one).

        Returns:
            None, or what the connection must be closed with: a
            :class:`~tubemq_aio.errors.RemoteProtocolError` (an undecodable answer; the frames
            after it are left unread) or a :class:`~tubemq_aio.errors.RemoteRpcError` that
            closes the connection (every frame was read).
        """
        pending = self._pending
        stats = self.stats
        raw = self._raw
        io_error: RemoteRpcError | None = None
        for serial, payload in frames:
            entry = pending.pop(serial, None)
            if entry is None:
                stats.dropped_responses += 1
                continue
            if self._room_waiters:
                self._wake_room()
            fut = entry[0]
            stats.responses += 1
            whole = False
            if raw and serial in raw:
                raw.discard(serial)
                if success_bounds(payload) is not None:  # else decoded below, as any answer
                    if fut.done():
                        stats.dropped_responses += 1
                    else:
                        fut.set_result(payload)
                    continue
                whole = True
            else:
                business = plain_success(payload)
                if business is not None:  # almost every answer
                    if fut.done():
                        stats.dropped_responses += 1
                    else:
                        fut.set_result(business)
                    continue
            try:
                closing = settle_other(self.label, stats, payload, fut, whole)
            except RemoteProtocolError as exc:
                return exc
            if closing is not None:
                io_error = closing
        return io_error


if TYPE_CHECKING:
    RegistryBase = SendRegistry
else:
    #: What :class:`~tubemq_aio._io.pending.PendingCalls` is built on: the compiled twin when
    #: the accelerator is built, else :class:`SendRegistry`.
    RegistryBase = twin_or(SendRegistry)
