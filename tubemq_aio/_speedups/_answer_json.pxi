# The gateway's fetch answer: screened raw messages straight to the JSON of ``messages``.
# Included by _cdecode.pyx (one extension module); cimports and shared helpers live there.

# ---------------------------------------------------------------------------------------------
# The gateway's fetch answer: screened raw messages straight to the JSON of ``messages``.

cdef struct _JsonItem:
    char digits[20]        # the message id in decimal (written once, copied once)
    int ndigits
    Py_ssize_t body        # where the body starts in the payload
    Py_ssize_t value_len   # bytes of the value between its quotes
    bint utf8              # the value is the body as text (else base64)
    PyObject *payload      # borrowed from the item
    PyObject *tail         # borrowed; kept alive by the encoder's list of tails


#: The largest payload the C CRC function takes in one call (its length is a uint32_t).
cdef uint64_t _CRC_MAX = 0xFFFFFFFFULL


cdef inline bint _low_bit(object flag) except -1:
    """Bit 0 of the int ``flag`` (any size) without a Python ``&`` for those of 64 bits."""
    cdef int overflow
    cdef long long v = PyLong_AsLongLongAndOverflow(flag, &overflow)
    if overflow:  # beyond 64 bits: its lowest bit, as Python reads it
        return (flag & 1) != 0
    return (v & 1) != 0


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
        cdef long long want
        cdef int overflow
        for i in range(n):
            item = <object>PyTuple_GET_ITEM(items, i)
            message_id = <object>PyTuple_GET_ITEM(item, 0)
            expected = <object>PyTuple_GET_ITEM(item, 1)
            payload = <bytes>PyTuple_GET_ITEM(item, 2)
            size = PyBytes_GET_SIZE(payload)
            p = <const unsigned char *>PyBytes_AS_STRING(payload)
            want = PyLong_AsLongLongAndOverflow(expected, &overflow)
            if self.crc_fn != NULL and <uint64_t>size <= _CRC_MAX and not overflow:
                crc_ok = <long long>(self.crc_fn(0, p, <uint32_t>size) & 0x7FFFFFFF) == want
            else:
                crc_ok = (self.crc32(payload) & 0x7FFFFFFF) == expected
            msg_type = ""
            if _low_bit(<object>PyTuple_GET_ITEM(item, 3)):
                attr_len = <int32_t>_be32(p) if size >= 4 else -1
                if attr_len < 0 or 4 + attr_len > size:
                    counters.decode_errors += 1
                    self.log.warning(
                        UNDECODABLE_MESSAGE_LOG,
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
                self.log.warning(CHECKSUM_MISMATCH_LOG, message_id,
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
        cdef int64_t id_value
        cdef char *w
        cdef bytes out
        cdef object no_tail = self.tails.get(None)
        if no_tail is None:
            no_tail = self.tail_of(None)
        held.append(no_tail)
        for i in range(n):
            item = seq[i]
            message_id = <object>PyTuple_GET_ITEM(item, 0)
            id_value = message_id  # OverflowError beyond int64, as the wire allows
            items[i].ndigits = _digits(id_value, items[i].digits)
            items[i].payload = PyTuple_GET_ITEM(item, 2)
            size = PyBytes_GET_SIZE(<object>items[i].payload)
            p = <const unsigned char *>PyBytes_AS_STRING(<object>items[i].payload)
            items[i].body = 0
            items[i].tail = <PyObject *>no_tail
            if _low_bit(<object>PyTuple_GET_ITEM(item, 3)):
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
            total += 26 + items[i].ndigits + items[i].value_len \
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
            w = _put(w, items[i].digits, items[i].ndigits)
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
