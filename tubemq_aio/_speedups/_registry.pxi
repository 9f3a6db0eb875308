# The connection's registration state, typed: ``tubemq_aio._io.registry.SendRegistry`` compiled.
# Included by _cdecode.pyx (one extension module); cimports and shared helpers live there.

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from time import monotonic as _monotonic

cdef long long _MAX_SERIAL = 0x7FFFFFFF  # tubemq_aio._io.decisions.MAX_SERIAL
cdef Py_ssize_t _ONE_BLOCK = 8192  # tubemq_aio.protocol.framing.BLOCK_SIZE
cdef unsigned int _BEGIN = 0xFF7FF4FE  # tubemq_aio.protocol.framing.BEGIN_TOKEN


cdef inline void _put_u32(char *out, unsigned int value) noexcept:
    out[0] = <char>((value >> 24) & 0xFF)
    out[1] = <char>((value >> 16) & 0xFF)
    out[2] = <char>((value >> 8) & 0xFF)
    out[3] = <char>(value & 0xFF)


cdef inline double _monotonic_now() noexcept:
    """``time.monotonic()`` without its call: the same clock, in seconds rounded as CPython
    rounds it (``_PyTime_AsSecondsDouble``: whole seconds exactly, else nanoseconds / 1e9)."""
    cdef timespec ts
    cdef long long ns
    clock_gettime(CLOCK_MONOTONIC, &ts)
    ns = <long long>ts.tv_sec * 1000000000 + ts.tv_nsec
    if ns % 1000000000 == 0:
        return <double>(ns // 1000000000)
    return <double>ns / 1e9


cdef inline object _one_block_header(long long serial, Py_ssize_t size):
    """``ONE_BLOCK_HEADER.pack(BEGIN_TOKEN, serial, 1, size)``."""
    cdef object header = PyBytes_FromStringAndSize(NULL, 16)
    cdef char *out = PyBytes_AS_STRING(header)
    _put_u32(out, _BEGIN)
    _put_u32(out + 4, <unsigned int>serial)
    _put_u32(out + 8, 1)
    _put_u32(out + 12, <unsigned int>size)
    return header


cdef inline object _plain_success(object payload):
    """The business bytes of a plain SUCCESS envelope with one-byte lengths, else None (the
    shape ``ResponseDecoder`` cuts out; the pure ``plain_success`` takes any SUCCESS)."""
    cdef const unsigned char *b
    cdef Py_ssize_t n, size, length
    if PyBytes_CheckExact(payload):
        n = PyBytes_GET_SIZE(payload)
        b = <const unsigned char *>PyBytes_AS_STRING(payload)
        if n > 12 and memcmp(b, _SUCCESS_PREFIX, 8) == 0:
            size = b[8]
            length = b[12]
            if (size < 0x80 and length < 0x80 and b[9] == 0x08 and b[10] < 0x80
                    and b[11] == 0x12 and 13 + length == 9 + size and 9 + size <= n):
                return PyBytes_FromStringAndSize(<const char *>b + 13, length)
    return None


cdef class SendRegistry:
    """``tubemq_aio._io.registry.SendRegistry`` compiled: the same fields (set by the owner)
    and the same ``start_parts`` and ``resolve``; the rare shapes (a frame of more than one
    block or of the legacy framing, an answer that is not a plain SUCCESS) go to the pure
    helpers handed in as ``_frame_other``, ``_settle_other`` and ``_success_bounds``.
    """

    cdef public str label
    cdef public object stats
    cdef public double next_deadline
    cdef public double last_activity
    cdef public object _loop
    cdef object _new_future_fn
    cdef AnswerFutures _futures  # the maker behind _new_future when it is one, else None
    cdef public object _clock
    cdef public dict _pending
    cdef public set _raw
    cdef public long long _serial
    cdef public long long _written
    cdef public Py_ssize_t _max_in_flight
    cdef public object _room_waiters
    cdef public bint _paused
    cdef public object _closed
    cdef public bint _legacy
    cdef public list _wbuf
    cdef public Py_ssize_t _tick_bytes
    cdef public Py_ssize_t _write_high
    cdef public object _frame_other
    cdef public object _settle_other
    cdef public object _success_bounds
    cdef object _last_serial  # the serial of the latest call _start registered, as an int
    cdef _Field _f_requests_sent  # stats.requests_sent

    def __cinit__(self):
        self._f_requests_sent = _Field("requests_sent")
        self._write_high = PY_SSIZE_T_MAX

    @property
    def _new_future(self):
        return self._new_future_fn

    @_new_future.setter
    def _new_future(self, value):
        self._new_future_fn = value
        owner = getattr(value, "__self__", None)
        self._futures = owner if type(owner) is AnswerFutures else None

    def _flush(self):
        """Write the tick's frames (the connection's; nothing to write to here)."""
        self._wbuf = []

    def _wake_room(self):
        """Let the first caller still waiting for an in-flight slot go on."""
        waiters = self._room_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def start_parts(self, parts, Py_ssize_t size, timeout, deadline=None):
        """As ``SendRegistry.start_parts``."""
        fut = self._start(parts, size, timeout, deadline)
        return None if fut is None else (self, self._last_serial, fut)

    cdef object _start(self, object parts, Py_ssize_t size, object timeout, object deadline):
        """``start_parts`` without its result tuple: the future (its serial in
        ``_last_serial``), or None when there is no room now."""
        cdef dict pending = self._pending
        cdef double due
        cdef long long serial
        cdef object serial_obj
        cdef object header = None
        cdef object fut
        cdef list buf
        if deadline is None:
            if (self._closed is not None or self._paused
                    or PyDict_Size(pending) >= self._max_in_flight or self._room_waiters):
                return None
            if self._clock is _monotonic:
                due = _monotonic_now() + <double>timeout
            else:
                due = <double>self._clock() + <double>timeout
            deadline = due
        else:
            due = <double>deadline
        serial = self._serial + 1 if self._serial < _MAX_SERIAL else 1
        serial_obj = serial
        while PyDict_Contains(pending, serial_obj):  # only after a wrap, an ancient call pending
            serial = serial + 1 if serial < _MAX_SERIAL else 1
            serial_obj = serial
        if 0 < size <= _ONE_BLOCK and not self._legacy:
            header = _one_block_header(serial, size)
        else:  # raises for an empty or oversized payload, before anything is registered
            parts = self._frame_other(serial, parts, size, self._legacy)
        self._serial = serial
        fut = self._new_future_fn() if self._futures is None else self._futures._new()
        pending[serial_obj] = (fut, deadline, timeout)
        if due < self.next_deadline:
            self.next_deadline = due
        self._f_requests_sent.add(self.stats, 1)
        buf = self._wbuf
        if not buf:
            self._loop.call_soon(self._flush)
            self._tick_bytes = 0
        if header is not None:
            PyList_Append(buf, header)
        buf.extend(parts)
        self._last_serial = serial_obj
        self._tick_bytes += size
        if self._tick_bytes >= self._write_high:
            self._flush()
        return fut

    def resolve(self, frames):
        """As ``SendRegistry.resolve``."""
        cdef dict pending = self._pending
        cdef set raw = self._raw
        cdef object stats = self.stats
        cdef object entry, fut, business, closing, serial, payload
        cdef object io_error = None
        cdef Py_ssize_t answered = 0, dropped = 0
        cdef bint whole
        cdef AnswerFutures futures = self._futures
        if futures is not None:
            futures._open()
        try:
            for frame in frames:
                serial, payload = frame
                entry = pending.pop(serial, None)
                if entry is None:
                    dropped += 1
                    continue
                if self._room_waiters:
                    self._wake_room()
                fut = (<tuple>entry)[0]
                answered += 1
                whole = False
                if raw and serial in raw:
                    raw.discard(serial)
                    if self._success_bounds(payload) is not None:
                        if fut.done():
                            dropped += 1
                        else:
                            fut.set_result(payload)
                        continue
                    whole = True
                else:
                    business = _plain_success(payload)
                    if business is not None:  # almost every answer
                        if type(fut) is AnswerFuture:
                            if (<AnswerFuture>fut)._state != _PENDING:
                                dropped += 1
                            else:
                                (<AnswerFuture>fut)._set_result(business)
                        elif fut.done():
                            dropped += 1
                        else:
                            fut.set_result(business)
                        continue
                try:
                    closing = self._settle_other(self.label, stats, payload, fut, whole)
                except _RemoteProtocolError as exc:
                    return exc
                if closing is not None:
                    io_error = closing
            return io_error
        finally:
            if futures is not None:
                futures._close()
            if answered:
                stats.responses += answered
            if dropped:
                stats.dropped_responses += dropped
