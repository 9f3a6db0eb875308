# The produce twins: the send answer path and the plain send request.
# Included by _cdecode.pyx (one extension module); cimports and shared helpers live there.

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
        cdef _PlainHead entry = self._hit(topic, partition_id, body, auth, timeout_ms)
        if entry is not None:
            return (entry.head, body, entry.tail), (
                PyBytes_GET_SIZE(entry.head) + entry.size + PyBytes_GET_SIZE(entry.tail))
        return self._miss(topic, partition_id, body, auth, timeout_ms)

    cdef _PlainHead _hit(self, topic, partition_id, body, auth, long long timeout_ms):
        """The kept pieces for this request, or None (``_miss`` makes them)."""
        cdef PyObject *found
        cdef _PlainHead entry
        found = PyDict_GetItem(self.topics, topic)
        if found != NULL and PyBytes_CheckExact(body):
            found = PyDict_GetItem(<dict>found, partition_id)
            if found != NULL:
                entry = <_PlainHead>found
                if (entry.auth is auth and entry.timeout_ms == timeout_ms
                        and entry.size == PyBytes_GET_SIZE(body)):
                    return entry
        return None

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
