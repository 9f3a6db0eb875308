# The consume twins: GetMessage answer parsing, raw and column decodes.
# Included by _cdecode.pyx (one extension module); cimports and shared helpers live there.

cdef class GetMessageParser:
    """``parse_get_message_response`` compiled: a bytes -> ``GetMessageResponse`` callable.

    Args:
        response_cls: ``GetMessageResponse``.
        raw_cls: ``RawMessage`` (a named tuple of four fields).
        fallback: the pure parser, called for every input this walker does not take.
        undefined: the offset of an absent ``currOffset``/``maxOffset``.
    """

    cdef object response_cls
    cdef PyTypeObject *raw_type
    cdef object raw_cls
    cdef object fallback
    cdef object undefined

    def __init__(self, response_cls, raw_cls, fallback, undefined):
        if not (isinstance(raw_cls, type) and issubclass(raw_cls, tuple)):
            raise TypeError("raw_cls must be a tuple subclass")
        self.response_cls = response_cls
        self.raw_cls = raw_cls
        self.raw_type = <PyTypeObject *>raw_cls
        self.fallback = fallback
        self.undefined = undefined

    def __call__(self, data):
        cdef object parsed = None
        if PyBytes_CheckExact(data):
            parsed = self._walk(data, 0, PyBytes_GET_SIZE(data), NULL)
        return self.fallback(data) if parsed is None else parsed

    def columns(self, data, Py_ssize_t start=0, Py_ssize_t stop=-1):
        """The answer without its messages, and its messages as columns; None when the pure
        parser must decide (the same inputs as for a call).

        The answer is ``data[start:stop]`` (``stop`` -1: to the end), read in place; the spans
        are positions in ``data``.

        Returns:
            ``(response, n, spans)``: ``response`` with ``messages=()``; ``spans`` is ``5 * n``
            native int64 values, five runs of ``n``: ``messageId``, ``checkSum``, ``flag``,
            and the start and end of each payload in ``data``.
        """
        cdef _Spans spans
        cdef object parsed
        cdef bytes out
        cdef int64_t *column
        cdef Py_ssize_t i, n
        if not PyBytes_CheckExact(data):
            return None
        if stop == -1:
            stop = PyBytes_GET_SIZE(data)
        if not 0 <= start <= stop <= PyBytes_GET_SIZE(data):
            raise ValueError("the answer's bounds lie outside data")
        spans.items = NULL
        spans.count = spans.capacity = 0
        try:
            parsed = self._walk(data, start, stop, &spans)
            if parsed is None:
                return None
            n = spans.count
            out = PyBytes_FromStringAndSize(NULL, 5 * n * sizeof(int64_t))
            column = <int64_t *>PyBytes_AS_STRING(out)
            for i in range(n):
                column[i] = spans.items[i].message_id
                column[n + i] = spans.items[i].checksum
                column[2 * n + i] = spans.items[i].flag
                column[3 * n + i] = spans.items[i].start
                column[4 * n + i] = spans.items[i].stop
            return parsed, n, out
        finally:
            PyMem_Free(spans.items)

    cdef object _walk(self, bytes data, Py_ssize_t start, Py_ssize_t end, _Spans *spans):
        """The response in ``data[start:end]``, or None when the pure parser must decide. With
        ``spans``, the messages go there (as spans, positions in ``data``) and the response
        has none."""
        cdef const unsigned char *buf = <const unsigned char *>PyBytes_AS_STRING(data)
        cdef Py_ssize_t pos = start, size
        cdef uint64_t key, value
        cdef unsigned int seen = 0, bit
        cdef int32_t err_code = 0, number
        cdef bint success = False, esc = False, slow = False
        cdef object err_msg = "", curr = self.undefined, top = self.undefined
        cdef object dlt = -1, min_limit = None, item
        cdef list messages = []
        while pos < end:
            if not _varint(buf, end, &pos, &key) or key > 0xFF:
                return None
            if key == 0x22:  # field 4, length-delimited: one TransferedMessage
                if not _length(buf, end, &pos, &size):
                    return None
                if spans != NULL:
                    if _add_span(spans, buf, pos, pos + size):
                        return None
                else:
                    item = self._transfered(buf, pos, pos + size)
                    if item is None:
                        return None
                    PyList_Append(messages, item)
                pos += size
                continue
            bit = 1u << (key >> 3)
            if seen & bit:
                return None  # a repeated singular field: the pure parser decides
            seen |= bit
            if key == 0x1A:  # field 3: errMsg
                if not _length(buf, end, &pos, &size):
                    return None
                try:
                    err_msg = PyUnicode_DecodeUTF8(<const char *>buf + pos, size, "strict")
                except UnicodeDecodeError:
                    return None
                pos += size
                continue
            # Every other field taken here is a varint.
            if key & 7 or not _varint(buf, end, &pos, &value):
                return None
            key >>= 3
            if key == 1 or key == 7 or key == 9:  # bools
                if value > 1:
                    return None
                if key == 1:
                    success = value == 1
                elif key == 7:
                    esc = value == 1
                else:
                    slow = value == 1
            elif key == 2 or key == 6:  # int32
                if not _int32(value, &number):
                    return None
                if key == 2:
                    err_code = number
                else:
                    min_limit = number
            elif key == 5:
                curr = <int64_t>value
            elif key == 8:
                dlt = <int64_t>value
            elif key == 10:
                top = <int64_t>value
            else:
                return None
        if (seen & 0b110) != 0b110:  # success and errCode are required
            return None
        return self.response_cls(
            success=success,
            err_code=err_code,
            err_msg=err_msg,
            messages=tuple(messages),
            curr_offset=curr,
            max_offset=top,
            curr_data_dlt=dlt,
            min_limit_time=min_limit,
            esc_flow_ctrl=esc,
            require_slow=slow,
        )

    cdef object _transfered(self, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t stop):
        """One ``TransferedMessage`` as a ``RawMessage``, or None."""
        cdef _Span span
        if not _read_span(buf, pos, stop, &span):
            return None
        payload = PyBytes_FromStringAndSize(<const char *>buf + span.start, span.stop - span.start)
        return tubemq_tuple4(self.raw_type, span.message_id, span.checksum, payload, span.flag)


# Message fields, in the order RawDecoder fills them.
_FIELDS = (
    "topic", "body", "attributes", "msg_type", "msg_time",
    "message_id", "partition_key", "attribute", "flag", "crc_ok",
)
cdef enum:
    _NFIELDS = 10


cdef class RawDecoder:
    """``decode_raw_messages`` compiled: same arguments, same result, same counters and logs.

    Args:
        message_cls: ``Message`` (a slotted dataclass with the ten fields of ``_FIELDS``).
        crc32: the CRC-32 function (zlib-ng's when installed).
        attr_cache: the shared ``raw attribute block -> info`` cache (a dict).
        attribute_info: fills the cache on a miss (the pure module's function).
        no_attributes: the shared empty attribute mapping.
        log: the logger for dropped messages.
        fallback: the pure function, for input that is not made of tuples of bytes payloads.
    """

    cdef PyTypeObject *message_type
    cdef object message_cls
    cdef Py_ssize_t offsets[_NFIELDS]
    cdef object crc32
    cdef dict attr_cache
    cdef object attribute_info
    cdef object no_attributes
    cdef object log
    cdef object fallback

    def __init__(self, message_cls, crc32, attr_cache, attribute_info, no_attributes, log,
                 fallback):
        _slot_offsets(message_cls, _FIELDS, self.offsets)
        self.message_cls = message_cls
        self.message_type = <PyTypeObject *>message_cls
        self.crc32 = crc32
        self.attr_cache = attr_cache
        self.attribute_info = attribute_info
        self.no_attributes = no_attributes
        self.log = log
        self.fallback = fallback

    def __call__(self, raw, *, topic, partition_key, filters, counters, deliver_corrupt=False):
        cdef list items = raw if type(raw) is list else list(raw)
        cdef object item
        for item in items:
            if not (PyTuple_CheckExact(item) or isinstance(item, tuple)) \
                    or PyTuple_GET_SIZE(item) != 4 \
                    or not PyBytes_CheckExact(<object>PyTuple_GET_ITEM(item, 2)):
                return self.fallback(items, topic=topic, partition_key=partition_key,
                                     filters=filters, counters=counters,
                                     deliver_corrupt=deliver_corrupt)
        return self._decode(items, topic, partition_key, filters, counters, deliver_corrupt)

    cdef tuple _decode(self, list items, object topic, object partition_key, object filters,
                       object counters, object deliver_corrupt):
        cdef list result = []
        cdef Py_ssize_t total = 0, size, attr_len, end
        cdef object item, message_id, expected, flag, block, info, body, msg
        cdef bytes payload
        cdef const unsigned char *p
        cdef object attribute, attrs, msg_type, msg_time, crc_ok
        cdef dict cache = self.attr_cache
        cdef PyObject *values[_NFIELDS]
        cdef bint corrupt_ok = bool(deliver_corrupt)
        cdef bint filtering = bool(filters)
        for item in items:
            message_id = <object>PyTuple_GET_ITEM(item, 0)
            expected = <object>PyTuple_GET_ITEM(item, 1)
            payload = <bytes>PyTuple_GET_ITEM(item, 2)
            flag = <object>PyTuple_GET_ITEM(item, 3)
            crc_ok = (self.crc32(payload) & 0x7FFFFFFF) == expected
            attribute = None
            attrs = self.no_attributes
            msg_type = ""
            msg_time = None
            if flag & 1:
                size = PyBytes_GET_SIZE(payload)
                p = <const unsigned char *>PyBytes_AS_STRING(payload)
                if size >= 4:
                    attr_len = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                                         | (<uint32_t>p[2] << 8) | <uint32_t>p[3])
                else:
                    attr_len = -1
                end = 4 + attr_len
                if attr_len < 0 or end > size:
                    counters.decode_errors += 1
                    self.log.warning(
                        UNDECODABLE_MESSAGE_LOG,
                        message_id,
                        partition_key,
                    )
                    continue
                if attr_len:
                    block = PyBytes_FromStringAndSize(<const char *>p + 4, attr_len)
                    info = cache.get(block)
                    if info is None:
                        info = self.attribute_info(block)
                    attribute, attrs, msg_type, msg_time = info
                body = PyBytes_FromStringAndSize(<const char *>p + end, size - end)
            else:
                body = payload
            if not crc_ok:
                counters.crc_mismatches += 1
                self.log.warning(CHECKSUM_MISMATCH_LOG, message_id,
                                 partition_key)
                if not corrupt_ok:
                    continue
            if filtering and msg_type not in filters:
                counters.filtered += 1
                continue
            values[0] = <PyObject *>topic
            values[1] = <PyObject *>body
            values[2] = <PyObject *>attrs
            values[3] = <PyObject *>msg_type
            values[4] = <PyObject *>msg_time
            values[5] = <PyObject *>message_id
            values[6] = <PyObject *>partition_key
            values[7] = <PyObject *>attribute
            values[8] = <PyObject *>flag
            values[9] = <PyObject *>crc_ok
            msg = tubemq_slotted(self.message_type, self.offsets, values, _NFIELDS)
            PyList_Append(result, msg)
            total += PyBytes_GET_SIZE(body)
        return result, total


ctypedef uint32_t (*_crc_fn)(uint32_t crc, const unsigned char *buf, uint32_t size) noexcept nogil


cdef class ColumnDecoder:
    """The Spark source's column decode (``tubemq_aio.spark._columns``) compiled: the rules of
    ``RawDecoder`` (same counters, same log lines, in message order), but the kept messages
    come out as columns, not ``Message`` objects.

    Args:
        crc32: the CRC-32 function (zlib-ng's when installed); it is given a memoryview.
        attr_cache: the shared ``raw attribute block -> info`` cache (a dict).
        attribute_info: fills the cache on a miss (the pure module's function).
        no_block: the info of a message without an attribute block (entry 0 of every table).
        log: the logger for dropped messages.
        crc_address: the address of the C function behind ``crc32``, of the signature
            ``uint32_t f(uint32_t crc, const unsigned char *buf, uint32_t len)`` (zlib-ng's
            ``zng_crc32``), called directly instead of ``crc32`` (no memoryview and no Python
            call per message); 0 calls ``crc32``. The caller vouches that both compute the
            same CRC-32.
    """

    cdef object crc32
    cdef _crc_fn crc_fn
    cdef dict attr_cache
    cdef object attribute_info
    cdef object no_block
    cdef object log

    def __init__(self, crc32, attr_cache, attribute_info, no_block, log, size_t crc_address=0):
        self.crc32 = crc32
        self.crc_fn = <_crc_fn>crc_address
        self.attr_cache = attr_cache
        self.attribute_info = attribute_info
        self.no_block = no_block
        self.log = log

    def __call__(self, bytes data, const int64_t[::1] ids, const int64_t[::1] checksums,
                 const int64_t[::1] flags, const int64_t[::1] starts, const int64_t[::1] ends,
                 object bodies, *, partition_key, filters, counters,
                 deliver_corrupt):
        """Decode the messages whose fields and payload spans (in ``data``) are given.

        The kept bodies are written end to end into ``bodies`` (a writable buffer at least as
        long as ``data``: the caller picks the allocator, e.g. Arrow's pool, which keeps its
        pages between batches where a fresh bytes object of this size costs page faults).

        Returns:
            ``(ids, offsets, blocks, infos)`` of the kept messages: native int64 ``messageId``
            values, native int32 Arrow offsets into ``bodies`` (one more than the messages; the
            last is the bytes written), native int32 indexes into ``infos`` (or None when no
            message had an attribute block) and the infos ``(attribute, attributes, msg_type,
            msg_time)`` of the distinct blocks, ``no_block`` first.

        Raises:
            ValueError: the columns differ in length, ``bodies`` is too short, or a span lies
                outside ``data``.
        """
        cdef Py_ssize_t n = ids.shape[0], size = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t i, kept, total
        cdef const unsigned char *buf = <const unsigned char *>PyBytes_AS_STRING(data)
        cdef bint any_block
        cdef list infos = [self.no_block]
        if not (checksums.shape[0] == flags.shape[0] == starts.shape[0] == ends.shape[0] == n):
            raise ValueError("columns of different lengths")
        if size > 0x7FFFFFFF:
            raise ValueError("answer too large for int32 offsets")

        for i in range(n):
            if not 0 <= starts[i] <= ends[i] <= size:
                raise ValueError("a payload span lies outside the answer")
        # Sized for every message, shrunk to the kept ones at the end (nobody sees them before).
        cdef PyObject *out[3]
        cdef Py_buffer view
        PyObject_GetBuffer(bodies, &view, PyBUF_WRITABLE)
        out[0] = out[1] = out[2] = NULL
        try:
            if view.len < size:
                raise ValueError("the bodies buffer is shorter than the answer")
            tubemq_resize(&out[0], n * sizeof(int64_t))
            tubemq_resize(&out[1], (n + 1) * sizeof(int32_t))
            tubemq_resize(&out[2], n * sizeof(int32_t))
            kept, total, any_block = self._decode(
                buf, ids, checksums, flags, starts, ends, partition_key, filters, counters,
                deliver_corrupt, infos,
                <int64_t *>PyBytes_AS_STRING(<object>out[0]),
                <int32_t *>PyBytes_AS_STRING(<object>out[1]),
                <char *>view.buf,
                <int32_t *>PyBytes_AS_STRING(<object>out[2]),
            )
            tubemq_resize(&out[0], kept * sizeof(int64_t))
            tubemq_resize(&out[1], (kept + 1) * sizeof(int32_t))
            tubemq_resize(&out[2], kept * sizeof(int32_t))
            return (<object>out[0], <object>out[1], <object>out[2] if any_block else None,
                    infos)
        finally:
            PyBuffer_Release(&view)
            for i in range(3):
                Py_XDECREF(out[i])

    cdef tuple _decode(self, const unsigned char *buf, const int64_t[::1] ids,
                       const int64_t[::1] checksums, const int64_t[::1] flags,
                       const int64_t[::1] starts, const int64_t[::1] ends, object partition_key,
                       object filters, object counters, object deliver_corrupt, list infos,
                       int64_t *kept_ids, int32_t *offsets, char *bodies, int32_t *blocks):
        """The loop of :meth:`__call__`; returns ``(kept, total body bytes, any block)``."""
        cdef Py_ssize_t n = ids.shape[0]
        cdef Py_ssize_t i, kept = 0, total = 0, a, b, attr_len, body, last_len = -1
        cdef const unsigned char *last = NULL
        cdef int32_t index, last_index = 0
        cdef bint crc_ok, corrupt_ok = bool(deliver_corrupt), filtering = bool(filters)
        cdef bint any_block = False
        cdef object block, info, got, msg_type
        cdef dict cache = self.attr_cache, seen = {}
        cdef _crc_fn crc_fn = self.crc_fn
        offsets[0] = 0
        for i in range(n):
            a = starts[i]
            b = ends[i]
            if crc_fn != NULL:  # sizes fit: the answer is below 2 GiB (checked by the caller)
                crc_ok = (crc_fn(0, buf + a, <uint32_t>(b - a)) & 0x7FFFFFFF) == checksums[i]
            else:
                crc_ok = (self.crc32(PyMemoryView_FromMemory(<char *>buf + a, b - a, PyBUF_READ))
                          & 0x7FFFFFFF) == checksums[i]
            index = 0
            body = a
            if flags[i] & 1:
                if b - a >= 4:
                    attr_len = <int32_t>_be32(buf + a)
                else:
                    attr_len = -1
                if attr_len < 0 or 4 + attr_len > b - a:
                    counters.decode_errors += 1
                    self.log.warning(
                        UNDECODABLE_MESSAGE_LOG,
                        ids[i],
                        partition_key,
                    )
                    continue
                body = a + 4 + attr_len
                if attr_len:
                    any_block = True
                    # Messages of one producer repeat the block: compare with the last one.
                    if attr_len == last_len and memcmp(buf + a + 4, last, attr_len) == 0:
                        index = last_index
                    else:
                        block = PyBytes_FromStringAndSize(<const char *>buf + a + 4, attr_len)
                        got = seen.get(block)
                        if got is None:
                            info = cache.get(block)
                            if info is None:
                                info = self.attribute_info(block)
                            got = len(infos)
                            infos.append(info)
                            seen[block] = got
                        index = got
                        last = buf + a + 4
                        last_len = attr_len
                        last_index = index
            if not crc_ok:
                counters.crc_mismatches += 1
                self.log.warning(CHECKSUM_MISMATCH_LOG, ids[i], partition_key)
                if not corrupt_ok:
                    continue
            if filtering:
                msg_type = infos[index][2]
                if msg_type not in filters:
                    counters.filtered += 1
                    continue
            kept_ids[kept] = ids[i]
            memcpy(bodies + total, buf + body, b - body)
            total += b - body
            blocks[kept] = index
            kept += 1
            offsets[kept] = <int32_t>total
        return kept, total, any_block
