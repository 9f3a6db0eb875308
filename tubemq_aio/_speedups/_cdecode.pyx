# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the consume hot loops and of the producer's plain send; see
:mod:`tubemq_aio._speedups`.

``GetMessageParser`` and ``RawDecoder`` give exactly what the pure-Python functions they are
bound to give (``tests/unit/test_speedups.py`` compares them on random and malformed input);
``GetMessageParser.columns`` and ``ColumnDecoder`` are the Spark source's column decode
(``tubemq_aio.spark._columns``, compared in ``tests/unit/spark/test_columns.py``).
The produce twins (``ResponseDecoder``, ``SendResultParser``, ``PlainSendEncoder``,
``plain_send_args``) are compared in ``tests/unit/test_speedups_produce.py`` and
``tests/unit/test_speedups_send.py``, the connection's ``SendRegistry`` and the send window's
``WindowSlots`` in ``tests/unit/test_speedups_registry.py``, the answer future
(``AnswerFutures``/``AnswerFuture``) against ``asyncio.Future`` in
``tests/unit/test_answer_future.py``, the send attempt's ``FastAttempt`` in
``tests/unit/test_speedups_attempt.py``; ``MessageJson`` is the gateway's fetch answer encoding
(``tubemq_aio.gateway.tubemq.fetched_messages``, compared in
``tests/unit/gateway/test_fetched_messages.py``).
The parser walks only the common, canonical shape of a ``GetMessageResponseB2C``; anything else
(an unknown field, a duplicate, a missing required field, a truncated or odd varint, text that
is not UTF-8) makes the walk return None and is handed to the pure parser, which then decides, so malformed input gets the same
error either way.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Contains, PyDict_GetItem, PyDict_Size
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport Py_UNICODE_ISSPACE, PyUnicode_DecodeUTF8
from cpython.ref cimport Py_INCREF, Py_XDECREF
cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from tubemq_aio.errors import FrameError
from tubemq_aio.errors import RemoteProtocolError as _RemoteProtocolError
from tubemq_aio.errors import ServerError as _ServerError

#: What the Spark column decode may ask of this build: 2 = ``GetMessageParser.columns`` takes
#: the answer's bounds and ``ColumnDecoder`` takes ``crc_address`` (a build without this name
#: is 1: the caller copies the answer out and lets the decoder call the CRC through Python).
COLUMN_API = 2
from tubemq_aio.protocol.framing import BEGIN_TOKEN, BLOCK_SIZE, DEFAULT_MAX_FRAME_BYTES, MAX_LIST_SIZE, Frame
from tubemq_aio.protocol.message import CHECKSUM_MISMATCH_LOG, UNDECODABLE_MESSAGE_LOG

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
    if pos[0] < end and buf[pos[0]] < 0x80:  # one byte: every key, flag and short length
        out[0] = buf[pos[0]]
        pos[0] += 1
        return True
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


#: ``int32`` values as a varint carries them: 0 .. 2**31 - 1, and negatives sign-extended.
cdef uint64_t _INT32_END = 0x80000000ULL
cdef uint64_t _INT32_NEG = 0xFFFFFFFF80000000ULL


cdef inline bint _int32(uint64_t value, int32_t *out) noexcept:
    """An int32 field: canonical encodings only (negatives sign-extended to 64 bits).

    The bounds are typed C constants: to Cython a bare literal that a 32-bit C ``long`` would
    not hold is a Python int, and ``value`` would be compared as one (about 140 instructions a
    call, two calls a message)."""
    if value < _INT32_END or value >= _INT32_NEG:
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


include "_consume.pxi"
include "_frames.pxi"
include "_produce.pxi"
include "_fields.pxi"
include "_answer_future.pxi"
include "_registry.pxi"
include "_window.pxi"
include "_fast_attempt.pxi"
include "_answer_json.pxi"
