# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the consume hot loops and of the producer's plain send; see
:mod:`tubemq_aio._speedups`.

``GetMessageParser`` and ``RawDecoder`` give exactly what the pure-Python functions they are
bound to give (``tests/unit/test_speedups.py`` compares them on random and malformed input);
``GetMessageParser.columns`` and ``ColumnDecoder`` are the Spark source's column decode
(``tubemq_aio.spark._columns``, compared in ``tests/unit/spark/test_columns.py``).
The produce twins (``ResponseDecoder``, ``SendResultParser``, ``PlainSendEncoder``,
``plain_send_args``) are compared in ``tests/unit/test_speedups_produce.py`` and
``tests/unit/test_speedups_send.py``; ``MessageJson`` is the gateway's fetch answer encoding
(``tubemq_aio.gateway.tubemq.fetched_messages``, compared in
``tests/unit/gateway/test_fetched_messages.py``).
The parser walks only the common, canonical shape of a ``GetMessageResponseB2C``; anything else
(an unknown field, a duplicate, a missing required field, a truncated or odd varint, text that
is not UTF-8) makes the walk return None and is handed to the pure parser, which then decides, so malformed input gets the same
error either way.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport Py_UNICODE_ISSPACE, PyUnicode_DecodeUTF8
from cpython.ref cimport Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from tubemq_aio.errors import FrameError

#: What the Spark column decode may ask of this build: 2 = ``GetMessageParser.columns`` takes
#: the answer's bounds and ``ColumnDecoder`` takes ``crc_address`` (a build without this name
#: is 1: the caller copies the answer out and lets the decoder call the CRC through Python).
COLUMN_API = 2
from tubemq_aio.protocol.framing import BEGIN_TOKEN, BLOCK_SIZE, DEFAULT_MAX_FRAME_BYTES, MAX_LIST_SIZE, Frame

cdef extern from *:
    """
    #include "structmember.h"

    /* Offset of a __slots__ member descriptor holding an object, or -1 for anything else. */
    static Py_ssize_t tubemq_slot_offset(PyObject *descr) {
        if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) return -1;
        return m->offset;
    }

    /* An instance of a tuple subclass (RawMessage) holding four new references to atoms
       (int, int, bytes, int), hence untracked by the cyclic GC as CPython does for such tuples. */
    static PyObject *tubemq_tuple4(PyTypeObject *t, PyObject *a, PyObject *b, PyObject *c,
                                   PyObject *d) {
        PyObject *r = t->tp_alloc(t, 4);
        if (r == NULL) return NULL;
        Py_INCREF(a); PyTuple_SET_ITEM(r, 0, a);
        Py_INCREF(b); PyTuple_SET_ITEM(r, 1, b);
        Py_INCREF(c); PyTuple_SET_ITEM(r, 2, c);
        Py_INCREF(d); PyTuple_SET_ITEM(r, 3, d);
        PyObject_GC_UnTrack(r);
        return r;
    }

    /* A tuple subclass instance (Frame) holding two new references. */
    static PyObject *tubemq_tuple2(PyTypeObject *t, PyObject *a, PyObject *b) {
        PyObject *r = t->tp_alloc(t, 2);
        if (r == NULL) return NULL;
        Py_INCREF(a); PyTuple_SET_ITEM(r, 0, a);
        Py_INCREF(b); PyTuple_SET_ITEM(r, 1, b);
        return r;
    }

    /* Grow or shrink a bytes object that nobody else has seen yet; 0, or -1 with an error. */
    static int tubemq_resize(PyObject **bytes, Py_ssize_t size) {
        if (*bytes == NULL) {
            *bytes = PyBytes_FromStringAndSize(NULL, size);
            return *bytes == NULL ? -1 : 0;
        }
        return _PyBytes_Resize(bytes, size);
    }

    /* A slotted instance with its n slots set to values (new references). It is untracked by
       the cyclic GC, as CPython does for tuples of atoms: its fields (str, bytes, int, bool,
       None, datetime, a read-only mapping of str) can never lead back to it. */
    static PyObject *tubemq_slotted(PyTypeObject *t, const Py_ssize_t *offsets,
                                    PyObject *const *values, int n) {
        PyObject *r = t->tp_alloc(t, 0);
        if (r == NULL) return NULL;
        for (int i = 0; i < n; i++) {
            Py_INCREF(values[i]);
            *(PyObject **)((char *)r + offsets[i]) = values[i];
        }
        PyObject_GC_UnTrack(r);
        return r;
    }
    """
    Py_ssize_t tubemq_slot_offset(object descr)
    object tubemq_tuple4(PyTypeObject *t, object a, object b, object c, object d)
    object tubemq_tuple2(PyTypeObject *t, object a, object b)
    int tubemq_resize(PyObject **bytes, Py_ssize_t size) except -1
    object tubemq_slotted(PyTypeObject *t, const Py_ssize_t *offsets, PyObject **values, int n)


cdef inline bint _varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
                         uint64_t *out) noexcept:
    """A varint of at most 10 bytes into ``out``; False for anything else."""
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    while True:
        if pos[0] >= end:
            return False
        byte = buf[pos[0]]
        pos[0] += 1
        if shift == 63 and byte > 1:
            return False
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            out[0] = result
            return True
        shift += 7
        if shift > 63:
            return False


cdef inline bint _int32(uint64_t value, int32_t *out) noexcept:
    """An int32 field: canonical encodings only (negatives sign-extended to 64 bits)."""
    if value < 0x80000000 or value >= 0xFFFFFFFF80000000:
        out[0] = <int32_t><uint32_t>value
        return True
    return False


cdef inline bint _length(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
                         Py_ssize_t *out) noexcept:
    """A length prefix that fits in what is left of ``buf``."""
    cdef uint64_t size
    if not _varint(buf, end, pos, &size) or size > <uint64_t>(end - pos[0]):
        return False
    out[0] = <Py_ssize_t>size
    return True


cdef struct _Span:
    # One TransferedMessage: its fields, and where its payload lies in the answer.
    int64_t message_id
    int64_t checksum
    int64_t flag
    int64_t start
    int64_t stop


cdef struct _Spans:
    _Span *items
    Py_ssize_t count
    Py_ssize_t capacity


cdef bint _read_span(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t stop,
                     _Span *out) noexcept:
    """One ``TransferedMessage`` (fields 1-4 exactly once each, any order) into ``out``."""
    cdef uint64_t key, value
    cdef Py_ssize_t size
    cdef unsigned int seen = 0, bit
    cdef int32_t number
    while pos < stop:
        if not _varint(buf, stop, &pos, &key) or key > 0x22:
            return False
        bit = 1u << (key >> 3)
        if seen & bit:
            return False
        seen |= bit
        if key == 0x1A:
            if not _length(buf, stop, &pos, &size):
                return False
            out.start = pos
            out.stop = pos + size
            pos += size
            continue
        if key & 7 or not _varint(buf, stop, &pos, &value):
            return False
        key >>= 3
        if key == 1:
            out.message_id = <int64_t>value
        elif key == 2 or key == 4:
            if not _int32(value, &number):
                return False
            if key == 2:
                out.checksum = number
            else:
                out.flag = number
        else:
            return False
    return seen == 0b11110


cdef int _add_span(_Spans *spans, const unsigned char *buf, Py_ssize_t pos,
                   Py_ssize_t stop) except -1:
    """Append one message's span; 1 when it is not one the walker takes, 0 when added."""
    cdef Py_ssize_t grown
    cdef _Span *items
    if spans.count == spans.capacity:
        grown = spans.capacity * 2 if spans.capacity else 512
        items = <_Span *>PyMem_Realloc(spans.items, grown * sizeof(_Span))
        if items == NULL:
            raise MemoryError()
        spans.items = items
        spans.capacity = grown
    if not _read_span(buf, pos, stop, &spans.items[spans.count]):
        return 1
    spans.count += 1
    return 0


cdef int _slot_offsets(object cls, tuple fields, Py_ssize_t *out) except -1:
    """Fill ``out`` with the slot offsets of ``fields``, the whole field list of the slotted
    dataclass ``cls`` in order (a changed class raises TypeError instead of being misfilled)."""
    cdef Py_ssize_t i, off
    if tuple(cls.__dataclass_fields__) != fields:
        raise TypeError(f"{cls.__name__} fields changed")
    for i in range(len(fields)):
        off = tubemq_slot_offset(vars(cls)[fields[i]])
        if off < 0:
            raise TypeError(f"{cls.__name__}.{fields[i]} is not a plain slot")
        out[i] = off
    return 0


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
                        "undecodable message %d in %s: attribute block does not fit the payload",
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
                self.log.warning("checksum mismatch of message %d in %s", message_id,
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
                        "undecodable message %d in %s: attribute block does not fit the payload",
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
                self.log.warning("checksum mismatch of message %d in %s", ids[i], partition_key)
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
                    raise FrameError(f"frame payload exceeds the {self.max_bytes}-byte cap")
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


# ---- the produce answer path ------------------------------------------------------------------

# RpcConnHeader{flag=1} + ResponseHeader{status=SUCCESS, protocolVer=3}, both delimited.
cdef const char *_SUCCESS_PREFIX = b"\x02\x08\x01\x04\x08\x00\x18\x03"


cdef class ResponseDecoder:
    """``decode_response`` compiled for the plain SUCCESS envelope with one-byte lengths (the
    answer of every send and commit); any other payload goes to the pure function.

    Args:
        fallback: the pure ``decode_response``.
    """

    cdef object fallback

    def __init__(self, fallback):
        self.fallback = fallback

    def __call__(self, payload):
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
        return self.fallback(payload)


cdef enum:
    _NRESULT = 7

_PARTITION_FIELDS = ("broker", "topic", "partition_id", "partition_key")
_BROKER_FIELDS = ("broker_id", "host", "port")


cdef inline PyObject *_slot(PyObject *obj, Py_ssize_t offset) noexcept:
    """The object in the slot at ``offset`` of ``obj`` (borrowed), NULL when it is unset."""
    return (<PyObject **>(<char *>obj + offset))[0]


cdef class SendResultParser:
    """``SendResultParser.parse`` compiled: ``(data, partition) -> SendResult``.

    Takes only the canonical successful answer: fields 1–7 in increasing order, each at most
    once, ``success``/``errCode``/``errMsg`` and ``messageId`` present, ``errCode`` 200, bools 0
    or 1, an ASCII ``errMsg``. Anything else (an error code, an old broker's id in ``errMsg``,
    malformed bytes) goes to the pure parser, which decides.

    Args:
        result_cls: ``SendResult`` (a slotted dataclass).
        fields: its seven field names in order.
        fallback: the pure ``(data, partition) -> SendResult``.
    """

    cdef PyTypeObject *result_type
    cdef object result_cls
    cdef Py_ssize_t offsets[_NRESULT]
    cdef object fallback
    # The slots of Partition (broker, topic, partition_id, partition_key) and of Broker
    # (broker_id), read straight from an instance of exactly those classes (no attribute
    # look-up); NULL types when they were not given.
    cdef PyTypeObject *partition_type
    cdef PyTypeObject *broker_type
    cdef Py_ssize_t part_offsets[4]
    cdef Py_ssize_t broker_offsets[3]
    cdef object _keep  # the two classes whose layouts the offsets describe

    def __init__(self, result_cls, fields, fallback, partition_cls=None, broker_cls=None):
        if len(fields) != _NRESULT:
            raise TypeError("SendResult fields changed")
        _slot_offsets(result_cls, tuple(fields), self.offsets)
        self.result_cls = result_cls
        self.result_type = <PyTypeObject *>result_cls
        self.fallback = fallback
        if partition_cls is not None and broker_cls is not None:
            _slot_offsets(partition_cls, _PARTITION_FIELDS, self.part_offsets)
            _slot_offsets(broker_cls, _BROKER_FIELDS, self.broker_offsets)
            self.partition_type = <PyTypeObject *>partition_cls
            self.broker_type = <PyTypeObject *>broker_cls
            self._keep = (partition_cls, broker_cls)

    def __call__(self, data, partition):
        cdef object result = None
        if PyBytes_CheckExact(data):
            result = self._walk(data, partition)
        return self.fallback(data, partition) if result is None else result

    def parse(self, data, partition):
        """The same as calling the parser (a method, cheaper to call from Python)."""
        cdef object result = None
        if PyBytes_CheckExact(data):
            result = self._walk(data, partition)
        return self.fallback(data, partition) if result is None else result

    cdef object _walk(self, bytes data, object partition):
        """The result, or None when the pure parser must decide."""
        cdef const unsigned char *buf = <const unsigned char *>PyBytes_AS_STRING(data)
        cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t pos = 0, size, i
        cdef uint64_t key, value, field, last = 0
        cdef unsigned int seen = 0
        cdef int32_t err_code = 0
        cdef int64_t message_id = 0, append_time = -1, append_offset = -1
        cdef PyObject *values[_NRESULT]
        while pos < end:
            if not _varint(buf, end, &pos, &key) or key > 0x3F:
                return None
            field = key >> 3
            if field <= last:
                return None  # out of order, repeated or field 0: the pure parser decides
            last = field
            seen |= 1u << field
            if key == 0x1A:  # errMsg
                if not _length(buf, end, &pos, &size):
                    return None
                for i in range(size):
                    if buf[pos + i] >= 0x80:
                        return None  # the pure parser checks the UTF-8
                pos += size
                continue
            if key & 7 or not _varint(buf, end, &pos, &value):
                return None
            if field == 1 or field == 4:  # bools
                if value > 1:
                    return None
            elif field == 2:
                if not _int32(value, &err_code):
                    return None
            elif field == 5:
                message_id = <int64_t>value
            elif field == 6:
                append_time = <int64_t>value
            elif field == 7:
                append_offset = <int64_t>value
            else:
                return None
        # success (1), errCode (2), errMsg (3) are required; messageId (5) spares errMsg's parse.
        if (seen & 0b101110) != 0b101110 or err_code != 200:
            return None
        cdef PyObject *slot_topic = NULL
        cdef PyObject *slot_key = NULL
        cdef PyObject *slot_id = NULL
        cdef PyObject *slot_broker_id = NULL
        cdef PyObject *broker = NULL
        if self.partition_type != NULL and <PyTypeObject *>Py_TYPE(partition) == self.partition_type:
            broker = _slot(<PyObject *>partition, self.part_offsets[0])
            slot_topic = _slot(<PyObject *>partition, self.part_offsets[1])
            slot_id = _slot(<PyObject *>partition, self.part_offsets[2])
            slot_key = _slot(<PyObject *>partition, self.part_offsets[3])
            if broker != NULL and <PyTypeObject *>Py_TYPE(<object>broker) == self.broker_type:
                slot_broker_id = _slot(broker, self.broker_offsets[0])
        cdef object topic, partition_key, partition_id, broker_id
        if slot_topic != NULL and slot_key != NULL and slot_id != NULL and slot_broker_id != NULL:
            topic = <object>slot_topic
            partition_key = <object>slot_key
            partition_id = <object>slot_id
            broker_id = <object>slot_broker_id
        else:  # another class, or a slot left unset: as Python reads it
            topic = partition.topic
            partition_key = partition.partition_key
            partition_id = partition.partition_id
            broker_id = partition.broker.broker_id
        cdef object mid = message_id
        cdef object at = append_time
        cdef object ao = append_offset
        values[0] = <PyObject *>topic
        values[1] = <PyObject *>partition_key
        values[2] = <PyObject *>partition_id
        values[3] = <PyObject *>broker_id
        values[4] = <PyObject *>mid
        values[5] = <PyObject *>at
        values[6] = <PyObject *>ao
        return tubemq_slotted(self.result_type, self.offsets, values, _NRESULT)


# ---------------------------------------------------------------------------------------------
# The gateway's fetch answer: screened raw messages straight to the JSON of ``messages``.

cdef struct _JsonItem:
    int64_t message_id
    Py_ssize_t body        # where the body starts in the payload
    Py_ssize_t value_len   # bytes of the value between its quotes
    bint utf8              # the value is the body as text (else base64)
    PyObject *payload      # borrowed from the item
    PyObject *tail         # borrowed; kept alive by the encoder's list of tails


cdef const char *_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
cdef const char *_HEX = b"0123456789abcdef"


cdef inline bint _swar_special(uint64_t x) noexcept:
    """Whether one of the eight bytes of ``x`` is below 0x20, ``"``, ``\\`` or above 0x7F."""
    cdef uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL
    cdef uint64_t quote = x ^ (ones * 34), slash = x ^ (ones * 92)
    return (((x - ones * 0x20) | (quote - ones) | (slash - ones)) & ~x & highs) != 0 \
        or (x & highs) != 0


cdef inline Py_ssize_t _json_text_len(const unsigned char *s, Py_ssize_t n) noexcept:
    """Bytes of ``s`` written as the inside of a JSON string as orjson writes it (controls as
    ``\\b \\t \\n \\f \\r`` or ``\\u00xx``, ``"`` and ``\\`` escaped, the rest as is), or -1
    when ``s`` is not UTF-8 that Python's strict decoder accepts."""
    cdef Py_ssize_t i = 0, out = 0
    cdef unsigned char c, c1
    cdef uint64_t x
    while i < n:
        # Eight plain ASCII bytes at a time (no control, quote, backslash or high bit).
        while i + 8 <= n:
            memcpy(&x, s + i, 8)
            if _swar_special(x):
                break
            i += 8
            out += 8
        if i >= n:
            break
        c = s[i]
        if c < 0x80:
            if c < 0x20:
                out += 2 if (c == 8 or c == 9 or c == 10 or c == 12 or c == 13) else 6
            elif c == 34 or c == 92:
                out += 2
            else:
                out += 1
            i += 1
        elif c < 0xC2:
            return -1
        elif c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return -1
            out += 2
            i += 2
        elif c < 0xF0:
            if i + 2 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return -1
            c1 = s[i + 1]
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return -1  # overlong, or a surrogate
            out += 3
            i += 3
        elif c < 0xF5:
            if i + 3 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 \
                    or (s[i + 3] & 0xC0) != 0x80:
                return -1
            c1 = s[i + 1]
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                return -1  # overlong, or above U+10FFFF
            out += 4
            i += 4
        else:
            return -1
    return out


cdef inline char *_json_text(char *w, const unsigned char *s, Py_ssize_t n) noexcept:
    """Write ``s`` (checked by :func:`_json_text_len`) as the inside of a JSON string."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(n):
        c = s[i]
        if c >= 0x20 and c != 34 and c != 92:
            w[0] = <char>c
            w += 1
        elif c == 34 or c == 92:
            w[0] = 92
            w[1] = <char>c
            w += 2
        elif c == 8 or c == 9 or c == 10 or c == 12 or c == 13:
            w[0] = 92
            w[1] = b"btn?fr"[c - 8] if c != 12 else 102
            w += 2
        else:
            w[0] = 92
            w[1] = 117  # u
            w[2] = 48
            w[3] = 48
            w[4] = _HEX[c >> 4]
            w[5] = _HEX[c & 15]
            w += 6
    return w


cdef inline char *_base64(char *w, const unsigned char *s, Py_ssize_t n) noexcept:
    """Write ``s`` in standard base64 with padding (``4 * ceil(n / 3)`` bytes)."""
    cdef Py_ssize_t i = 0
    cdef uint32_t v
    while i + 3 <= n:
        v = (<uint32_t>s[i] << 16) | (<uint32_t>s[i + 1] << 8) | s[i + 2]
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = _B64[(v >> 6) & 63]
        w[3] = _B64[v & 63]
        w += 4
        i += 3
    if n - i == 1:
        v = <uint32_t>s[i] << 16
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = 61
        w[3] = 61
        w += 4
    elif n - i == 2:
        v = (<uint32_t>s[i] << 16) | (<uint32_t>s[i + 1] << 8)
        w[0] = _B64[v >> 18]
        w[1] = _B64[(v >> 12) & 63]
        w[2] = _B64[(v >> 6) & 63]
        w[3] = 61
        w += 4
    return w


cdef inline char *_put(char *w, const char *s, Py_ssize_t n) noexcept:
    memcpy(w, s, n)
    return w + n


cdef inline int _digits(int64_t v, char *out) noexcept:
    """``v`` in decimal into ``out`` (at most 20 bytes); the count written."""
    cdef char tmp[20]
    cdef int n = 0, k = 0
    cdef uint64_t u = (<uint64_t>0 - <uint64_t>v) if v < 0 else <uint64_t>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if v < 0:
        out[0] = 45
        k = 1
    while n:
        n -= 1
        out[k] = tmp[n]
        k += 1
    return k


cdef class MessageJson:
    """The gateway's ``screen_raw_messages`` and ``encode_messages_json`` compiled
    (``tubemq_aio.gateway.tubemq.fetched_messages``): same kept messages, counters, log lines
    and JSON bytes (``tests/unit/gateway/test_fetched_messages.py`` compares them).

    Args:
        crc32: the CRC-32 function (zlib-ng's when installed).
        attr_cache: the shared ``raw attribute block -> info`` cache (a dict).
        attribute_info: fills the cache on a miss.
        log: the logger for dropped messages.
        tail_of: ``block_tail``: the JSON ending the messages of a block (None: no block).
        tails: its cache (a dict, block -> tail).
        screen_fallback, encode_fallback: the pure functions, for input that is not made of
            tuples of (int, int, bytes, int).
        crc_address: the address of the C function behind ``crc32`` (as for
            ``ColumnDecoder``), called directly; 0 calls ``crc32``.
    """

    cdef object crc32
    cdef _crc_fn crc_fn
    cdef dict attr_cache
    cdef object attribute_info
    cdef object log
    cdef object tail_of
    cdef dict tails
    cdef object screen_fallback
    cdef object encode_fallback

    def __init__(self, crc32, attr_cache, attribute_info, log, tail_of, tails, screen_fallback,
                 encode_fallback, size_t crc_address=0):
        self.crc32 = crc32
        self.crc_fn = <_crc_fn>crc_address
        self.attr_cache = attr_cache
        self.attribute_info = attribute_info
        self.log = log
        self.tail_of = tail_of
        self.tails = tails
        self.screen_fallback = screen_fallback
        self.encode_fallback = encode_fallback

    @staticmethod
    cdef bint _plain(object raw):
        """Whether every item is a 4-tuple with an int id and flag and a bytes payload."""
        cdef object item
        for item in raw:
            if not isinstance(item, tuple) or PyTuple_GET_SIZE(item) != 4 \
                    or not PyBytes_CheckExact(<object>PyTuple_GET_ITEM(item, 2)) \
                    or type(<object>PyTuple_GET_ITEM(item, 0)) is not int \
                    or type(<object>PyTuple_GET_ITEM(item, 1)) is not int \
                    or type(<object>PyTuple_GET_ITEM(item, 3)) is not int:
                return False
        return True

    def screen(self, raw, *, partition_key, filters, counters):
        """See ``screen_raw_messages``."""
        if type(raw) is not tuple or not MessageJson._plain(raw):
            return self.screen_fallback(raw, partition_key=partition_key, filters=filters,
                                        counters=counters)
        cdef tuple items = <tuple>raw
        cdef Py_ssize_t i, j, n = PyTuple_GET_SIZE(items), size, attr_len
        cdef object item, message_id, msg_type, block, expected
        cdef bytes payload
        cdef const unsigned char *p
        cdef bint crc_ok, filtering = bool(filters)
        cdef list kept = None
        cdef long long want, flag
        cdef int overflow
        for i in range(n):
            item = <object>PyTuple_GET_ITEM(items, i)
            message_id = <object>PyTuple_GET_ITEM(item, 0)
            expected = <object>PyTuple_GET_ITEM(item, 1)
            payload = <bytes>PyTuple_GET_ITEM(item, 2)
            size = PyBytes_GET_SIZE(payload)
            p = <const unsigned char *>PyBytes_AS_STRING(payload)
            want = PyLong_AsLongLongAndOverflow(expected, &overflow)
            if self.crc_fn != NULL and size <= 0xFFFFFFFF and not overflow:
                crc_ok = <long long>(self.crc_fn(0, p, <uint32_t>size) & 0x7FFFFFFF) == want
            else:
                crc_ok = (self.crc32(payload) & 0x7FFFFFFF) == expected
            msg_type = ""
            flag = PyLong_AsLongLongAndOverflow(<object>PyTuple_GET_ITEM(item, 3), &overflow)
            if overflow:  # beyond 64 bits: its lowest bit, as Python reads it
                flag = <object>PyTuple_GET_ITEM(item, 3) & 1
            if flag & 1:
                attr_len = <int32_t>_be32(p) if size >= 4 else -1
                if attr_len < 0 or 4 + attr_len > size:
                    counters.decode_errors += 1
                    self.log.warning(
                        "undecodable message %d in %s: attribute block does not fit the payload",
                        message_id,
                        partition_key,
                    )
                    if kept is None:
                        kept = [<object>PyTuple_GET_ITEM(items, j) for j in range(i)]
                    continue
                if attr_len and filtering:
                    block = PyBytes_FromStringAndSize(<const char *>p + 4, attr_len)
                    info = self.attr_cache.get(block)
                    if info is None:
                        info = self.attribute_info(block)
                    msg_type = info[2]
            if not crc_ok:
                counters.crc_mismatches += 1
                self.log.warning("checksum mismatch of message %d in %s", message_id,
                                 partition_key)
                if kept is None:
                    kept = [<object>PyTuple_GET_ITEM(items, j) for j in range(i)]
                continue
            if filtering and msg_type not in filters:
                counters.filtered += 1
                if kept is None:
                    kept = [<object>PyTuple_GET_ITEM(items, j) for j in range(i)]
                continue
            if kept is not None:
                PyList_Append(kept, item)
        return items if kept is None else tuple(kept)

    def encode(self, raw, force_base64):
        """See ``encode_messages_json``."""
        if not isinstance(raw, (tuple, list)) or not MessageJson._plain(raw):
            return self.encode_fallback(raw, force_base64)
        cdef object seq = raw
        cdef Py_ssize_t n = len(seq)
        cdef _JsonItem *items = <_JsonItem *>PyMem_Realloc(NULL, (n if n else 1) * sizeof(_JsonItem))
        if items == NULL:
            raise MemoryError()
        try:
            return self._encode(seq, n, items, bool(force_base64))
        finally:
            PyMem_Free(items)

    cdef bytes _encode(self, object seq, Py_ssize_t n, _JsonItem *items, bint force):
        cdef Py_ssize_t i, size, attr_len, body_len, total = 2 + (n - 1 if n else 0)
        cdef Py_ssize_t last_len = -1
        cdef const unsigned char *p
        cdef const unsigned char *last = NULL
        cdef object item, block, tail, message_id
        cdef PyObject *last_tail = NULL
        cdef list held = []  # the tails in use (the cache may be emptied meanwhile)
        cdef char digits[20]
        cdef char *w
        cdef bytes out
        cdef object no_tail = self.tails.get(None)
        if no_tail is None:
            no_tail = self.tail_of(None)
        held.append(no_tail)
        for i in range(n):
            item = seq[i]
            message_id = <object>PyTuple_GET_ITEM(item, 0)
            items[i].message_id = message_id  # OverflowError beyond int64, as the wire allows
            items[i].payload = PyTuple_GET_ITEM(item, 2)
            size = PyBytes_GET_SIZE(<object>items[i].payload)
            p = <const unsigned char *>PyBytes_AS_STRING(<object>items[i].payload)
            items[i].body = 0
            items[i].tail = <PyObject *>no_tail
            if <object>PyTuple_GET_ITEM(item, 3) & 1:
                attr_len = <int32_t>_be32(p) if size >= 4 else -1
                if attr_len < 0 or 4 + attr_len > size:
                    raise ValueError(f"message {message_id}: attribute block does not fit")
                items[i].body = 4 + attr_len
                if attr_len:
                    # Messages of one producer repeat the block: compare with the last one.
                    if not (attr_len == last_len and memcmp(p + 4, last, attr_len) == 0):
                        block = PyBytes_FromStringAndSize(<const char *>p + 4, attr_len)
                        tail = self.tails.get(block)
                        if tail is None:
                            tail = self.tail_of(block)
                        held.append(tail)
                        last_tail = <PyObject *>tail
                        last = p + 4
                        last_len = attr_len
                    items[i].tail = last_tail
            body_len = size - items[i].body
            items[i].utf8 = False
            if not force:
                items[i].value_len = _json_text_len(p + items[i].body, body_len)
                items[i].utf8 = items[i].value_len >= 0
            if not items[i].utf8:
                items[i].value_len = 4 * ((body_len + 2) // 3)
            # {"message_id":"<id>","value":"<value>","encoding":"utf8"|"base64"<tail>
            total += 26 + _digits(items[i].message_id, digits) + items[i].value_len \
                + (19 if items[i].utf8 else 21) + PyBytes_GET_SIZE(<object>items[i].tail)
        out = PyBytes_FromStringAndSize(NULL, total)
        w = PyBytes_AS_STRING(out)
        w[0] = 91  # [
        w += 1
        for i in range(n):
            if i:
                w[0] = 44  # ,
                w += 1
            p = <const unsigned char *>PyBytes_AS_STRING(<object>items[i].payload)
            body_len = PyBytes_GET_SIZE(<object>items[i].payload) - items[i].body
            w = _put(w, b'{"message_id":"', 15)
            w += _digits(items[i].message_id, w)
            w = _put(w, b'","value":"', 11)
            if items[i].utf8 and items[i].value_len == body_len:
                w = _put(w, <const char *>p + items[i].body, body_len)  # nothing to escape
                w = _put(w, b'","encoding":"utf8"', 19)
            elif items[i].utf8:
                w = _json_text(w, p + items[i].body, body_len)
                w = _put(w, b'","encoding":"utf8"', 19)
            else:
                w = _base64(w, p + items[i].body, body_len)
                w = _put(w, b'","encoding":"base64"', 21)
            w = _put(w, PyBytes_AS_STRING(<object>items[i].tail),
                     PyBytes_GET_SIZE(<object>items[i].tail))
        w[0] = 93  # ]
        w += 1
        if w - PyBytes_AS_STRING(out) != total:  # pragma: no cover - a sizing bug of ours
            raise AssertionError("message JSON size mismatch")
        return out

# ---- the produce request path -----------------------------------------------------------------


cdef Py_ssize_t _MAX_CACHED = 65536  # SendRequestEncoder.MAX_CACHED_PREFIXES


cdef class _PlainHead:
    """The request pieces around a plain body for one partition: valid for one ``authInfo``
    object, wire timeout and body size (the envelope and the protobuf lengths depend on them)."""

    cdef object auth
    cdef long long timeout_ms
    cdef Py_ssize_t size
    cdef object head
    cdef object tail


cdef class PlainSendEncoder:
    """``SendRequestEncoder.plain_parts`` compiled: the request of a plain message (a ``bytes``
    body without attributes, type or time) as ``((head, body, tail), size)``.

    Every head and tail comes from the pure encoder (its ``encode_parts``), made once per
    partition, ``authInfo``, wire timeout and body size and kept here, so the bytes are the pure
    encoder's own; a send then costs two dictionary look-ups.

    Args:
        pure: the producer's ``SendRequestEncoder``.
        plain_message: ``tubemq_aio.protocol.message.plain_message``.
    """

    cdef object pure
    cdef object plain_message
    cdef dict topics  # topic -> {partition id -> _PlainHead}
    cdef Py_ssize_t cached

    def __init__(self, pure, plain_message):
        self.pure = pure
        self.plain_message = plain_message
        self.topics = {}
        self.cached = 0

    def plain_parts(self, topic, partition_id, body, auth, long long timeout_ms):
        """As ``SendRequestEncoder.plain_parts``."""
        cdef PyObject *found
        cdef dict heads
        cdef _PlainHead entry
        found = PyDict_GetItem(self.topics, topic)
        if found != NULL and PyBytes_CheckExact(body):
            found = PyDict_GetItem(<dict>found, partition_id)
            if found != NULL:
                entry = <_PlainHead>found
                if (entry.auth is auth and entry.timeout_ms == timeout_ms
                        and entry.size == PyBytes_GET_SIZE(body)):
                    return (entry.head, body, entry.tail), (
                        PyBytes_GET_SIZE(entry.head) + entry.size + PyBytes_GET_SIZE(entry.tail))
        return self._miss(topic, partition_id, body, auth, timeout_ms)

    cdef object _miss(self, topic, partition_id, body, auth, long long timeout_ms):
        head, data, tail, size = self.pure.encode_parts(
            topic, partition_id, self.plain_message(body), auth, timeout_ms)
        if PyBytes_CheckExact(body) and type(topic) is str and type(partition_id) is int:
            if self.cached >= _MAX_CACHED:
                self.topics.clear()
                self.cached = 0
            heads = self.topics.get(topic)
            if heads is None:
                heads = self.topics[topic] = {}
            entry = _PlainHead()
            entry.auth = auth
            entry.timeout_ms = timeout_ms
            entry.size = PyBytes_GET_SIZE(body)
            entry.head = head
            entry.tail = tail
            if partition_id not in heads:
                self.cached += 1
            heads[partition_id] = entry
        return (head, data, tail), size


def plain_send_args(topic, body, attributes, msg_type, msg_time):
    """``tubemq_aio.producer.config.plain_send_args`` compiled (same answer for every input)."""
    cdef Py_ssize_t i, n
    cdef Py_UCS4 c
    if not (type(topic) is str and PyBytes_CheckExact(body) and attributes is None
            and msg_type is None and msg_time is None and PyBytes_GET_SIZE(body) > 0):
        return False
    n = len(<str>topic)
    for i in range(n):  # topic.strip() != "": some character is not white space
        c = (<str>topic)[i]
        if not Py_UNICODE_ISSPACE(c):
            return True
    return False
