# The frame decoder twin of tubemq_aio.protocol.framing.FrameDecoder.
# Included by _cdecode.pyx (one extension module); cimports and shared helpers live there.

cdef enum:
    _HEADER = 0  # collecting the 12-byte frame header
    _LENGTH = 1  # collecting a 4-byte block length
    _BLOCK = 2   # copying block bytes into the payload
    # A declared block count reserves at most this much payload up front (a hostile header
    # must not make us allocate the 28 MiB cap for 16 bytes received); beyond it, doubling.
    _FIRST_RESERVE = 1 << 20


cdef inline uint32_t _be32(const unsigned char *p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef class FrameDecoder:
    """:class:`tubemq_aio.protocol.framing.FrameDecoder` compiled: same frames, errors, limits.

    Block bytes are copied once, straight from the received chunk into the frame's payload
    (the pure decoder keeps the blocks and joins them).
    """

    cdef Py_ssize_t max_bytes, max_blocks
    cdef object broken
    cdef unsigned char head[12]
    cdef int have
    cdef int state
    cdef object serial
    cdef Py_ssize_t blocks_left, block_left, block_len, done, capacity
    cdef PyObject *payload
    cdef PyTypeObject *frame_type

    def __init__(self, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES, max_list_size=MAX_LIST_SIZE):
        if max_frame_bytes <= 0 or max_list_size <= 0:
            raise ValueError("frame limits must be positive")
        self.max_bytes = min(max_frame_bytes, 1 << 62)
        self.max_blocks = min(max_list_size, 1 << 62)
        self.frame_type = <PyTypeObject *>Frame

    def __dealloc__(self):
        Py_XDECREF(self.payload)
        self.payload = NULL

    @property
    def buffered(self):
        """Bytes held for an incomplete frame."""
        if self.state == _BLOCK:
            return self.done + 4 + (self.block_len - self.block_left)
        return self.done + self.have

    def feed(self, data):
        """Add received bytes and return every frame they complete, in order.

        Raises:
            FrameError: the stream is malformed; this decoder is unusable from now on.
        """
        if self.broken is not None:
            raise self.broken
        cdef list frames = []
        cdef Py_buffer view
        if PyBytes_CheckExact(data):
            self._feed(<const unsigned char *>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                       frames)
            return frames
        try:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        except (TypeError, BufferError):  # not a plain buffer: as the pure decoder, bytes()
            return self.feed(bytes(data))
        try:
            # Every byte kept is copied before this returns: the caller may reuse its buffer.
            self._feed(<const unsigned char *>view.buf, view.len, frames)
        finally:
            PyBuffer_Release(&view)
        return frames

    cdef int _feed(self, const unsigned char *p, Py_ssize_t n, list frames) except -1:
        try:
            self._consume(p, n, frames)
        except FrameError as exc:
            self.broken = exc
            self._reset()
            raise
        return 0

    cdef void _reset(self) noexcept:
        Py_XDECREF(self.payload)
        self.payload = NULL
        self.capacity = 0
        self.done = 0
        self.have = 0
        self.state = _HEADER

    cdef int _consume(self, const unsigned char *p, Py_ssize_t n, list frames) except -1:
        cdef Py_ssize_t pos = 0, take, count, length
        cdef uint32_t token
        while True:
            if self.state == _HEADER:
                take = min(12 - self.have, n - pos)
                memcpy(self.head + self.have, p + pos, take)
                self.have += take
                pos += take
                if self.have < 12:
                    return 0
                self.have = 0
                token = _be32(self.head)
                if token != BEGIN_TOKEN:
                    raise FrameError(f"bad frame begin token 0x{token:08X}")
                count = _be32(self.head + 8)
                if not 0 < count <= self.max_blocks:
                    raise FrameError(
                        f"frame declares {count} blocks (allowed 1..{self.max_blocks})"
                    )
                self.serial = _be32(self.head + 4)
                self.blocks_left = count
                self.done = 0
                self.state = _LENGTH
            elif self.state == _LENGTH:
                take = min(4 - self.have, n - pos)
                memcpy(self.head + self.have, p + pos, take)
                self.have += take
                pos += take
                if self.have < 4:
                    return 0
                self.have = 0
                length = _be32(self.head)
                if self.done + length > self.max_bytes:
                    raise FrameError(f"frame payload exceeds the {self.max_bytes}-byte cap (max_frame_bytes)")
                if length > 8192:  # framing.BLOCK_SIZE: no TubeMQ sender writes a longer block
                    raise FrameError(f"frame block of {length} bytes (at most 8192)")
                self._reserve(length)
                self.block_len = self.block_left = length
                self.state = _BLOCK
            else:
                take = min(self.block_left, n - pos)
                if take:
                    memcpy(PyBytes_AS_STRING(<object>self.payload) + self.done
                           + (self.block_len - self.block_left), p + pos, take)
                    self.block_left -= take
                    pos += take
                if self.block_left:
                    return 0
                self.done += self.block_len
                self.blocks_left -= 1
                if self.blocks_left:
                    self.state = _LENGTH
                else:
                    self._emit(frames)
            if pos >= n and self.state != _BLOCK:
                return 0

    cdef int _reserve(self, Py_ssize_t length) except -1:
        """Make room for a block of ``length`` after the ``done`` bytes."""
        cdef Py_ssize_t need = self.done + length, want
        if self.blocks_left == 1:
            want = need  # the last block: the exact size
        elif need <= self.capacity:
            return 0
        elif self.capacity == 0:
            want = min(self.blocks_left * BLOCK_SIZE, self.max_bytes, _FIRST_RESERVE)
        else:
            want = min(self.capacity * 2, self.max_bytes)
        if want < need:
            want = need
        if want != self.capacity or self.payload == NULL:
            tubemq_resize(&self.payload, want)
            self.capacity = want
        return 0

    cdef int _emit(self, list frames) except -1:
        if self.payload == NULL:
            tubemq_resize(&self.payload, 0)
        elif self.capacity != self.done:
            tubemq_resize(&self.payload, self.done)
        payload = <object>self.payload
        Py_XDECREF(self.payload)  # the local `payload` holds it now
        self.payload = NULL
        self.capacity = 0
        self.done = 0
        self.state = _HEADER
        PyList_Append(frames, tubemq_tuple2(self.frame_type, self.serial, payload))
        return 0
