# A send attempt's two halves, typed: ``tubemq_aio.producer._fast_attempt.FastAttempt`` compiled.
# Included by _cdecode.pyx (one extension module), after _produce.pxi and _registry.pxi: it
# calls their classes' C-level methods when the encoder, the parser and the connection are them.

cdef class FastAttempt:
    """``tubemq_aio.producer._fast_attempt.FastAttempt`` compiled: the same fields (set by
    ``fast_attempt``) and the same ``begin_plain`` and ``answered``. The compiled encoder,
    answer parser and connection registry are called through their C methods (no argument or
    result tuples); any other object through its Python method, as the pure class does."""

    cdef public object _begin
    cdef public object _metadata
    cdef public object _blocker
    cdef public dict _window
    cdef public dict _unavailable
    cdef public dict _failing_links
    cdef public dict _failures
    cdef public dict _until
    cdef public object _counters
    cdef public object _tokens
    cdef public object _rpc
    cdef public dict _conns
    cdef public object _clock
    cdef object _plain_parts_fn
    cdef PlainSendEncoder _encoder  # the compiled encoder behind _plain_parts, else None
    cdef object _parse_fn
    cdef SendResultParser _parser  # the compiled parser behind _parse, else None
    # Fields read per send (see _Field).
    cdef _Field _f_topics, _f_partitions, _f_auth, _f_due, _f_valid, _f_cached
    cdef _Field _f_broker, _f_topic, _f_partition_id, _f_partition_key
    cdef _Field _f_broker_id, _f_host, _f_port

    def __cinit__(self):
        self._f_topics = _Field("_topics")
        self._f_partitions = _Field("partitions")
        self._f_auth = _Field("_broker_auth")
        self._f_due = _Field("_evaluation_due")
        self._f_valid = _Field("_cache_valid_until")
        self._f_cached = _Field("_cached")
        self._f_broker = _Field("broker")
        self._f_topic = _Field("topic")
        self._f_partition_id = _Field("partition_id")
        self._f_partition_key = _Field("partition_key")
        self._f_broker_id = _Field("broker_id")
        self._f_host = _Field("host")
        self._f_port = _Field("port")

    @property
    def _plain_parts(self):
        return self._plain_parts_fn

    @_plain_parts.setter
    def _plain_parts(self, value):
        self._plain_parts_fn = value
        owner = getattr(value, "__self__", None)
        self._encoder = owner if type(owner) is PlainSendEncoder else None

    @property
    def _parse(self):
        return self._parse_fn

    @_parse.setter
    def _parse(self, value):
        self._parse_fn = value
        owner = getattr(value, "__self__", None)
        self._parser = owner if type(owner) is SendResultParser else None

    def begin_plain(self, topic, body, now_obj, long long timeout_ms, attempt_timeout):
        """As ``FastAttempt.begin_plain``."""
        cdef PyObject *found
        cdef object meta, blocker, partitions, partition, broker, parts, conn, fut, started, ports
        cdef object counter_obj
        cdef unsigned long long counter
        cdef Py_ssize_t n, size
        cdef double now = now_obj
        cdef _PlainHead entry
        found = PyDict_GetItem(self._f_topics.read(self._metadata), topic)
        meta = None if found == NULL else <object>found
        blocker = self._blocker
        counters = self._counters
        counter_obj = None
        if type(counters) is dict:
            counter_obj = (<dict>counters).get(topic)
        if (meta is None or counter_obj is None
                or now >= <double>self._f_due.read(blocker)
                or now >= <double>self._f_valid.read(blocker)
                or self._f_cached.read(blocker) or self._until):
            return self._general(topic, body, now_obj, timeout_ms, attempt_timeout)
        partitions = self._f_partitions.read(meta)
        n = len(partitions)
        if not n:
            return self._general(topic, body, now_obj, timeout_ms, attempt_timeout)
        counter = (<unsigned long long>counter_obj + 1) & 0xFFFFFFFFULL
        partition = partitions[<Py_ssize_t>((counter & 0x7FFFFFFF) % <unsigned long long>n)]
        (<dict>counters)[topic] = counter
        auth = self._f_auth.read(self._tokens)
        p_topic = self._f_topic.read(partition)
        p_id = self._f_partition_id.read(partition)
        entry = None
        if self._encoder is not None:
            entry = self._encoder._hit(p_topic, p_id, body, auth, timeout_ms)
        if entry is not None:
            parts = (entry.head, body, entry.tail)
            size = PyBytes_GET_SIZE(entry.head) + entry.size + PyBytes_GET_SIZE(entry.tail)
        else:
            parts, size = self._plain_parts_fn(p_topic, p_id, body, auth, timeout_ms)
        broker = self._f_broker.read(partition)
        found = PyDict_GetItem(self._conns, self._f_host.read(broker))
        conn = None
        if found != NULL:
            ports = <object>found
            found = PyDict_GetItem(ports, self._f_port.read(broker))
            if found != NULL:
                conn = <object>found
        if conn is not None:
            if isinstance(conn, SendRegistry):
                fut = (<SendRegistry>conn)._start(parts, size, attempt_timeout, None)
                if fut is not None:
                    return partition, conn, (<SendRegistry>conn)._last_serial, fut
                closed = (<SendRegistry>conn)._closed is not None
            else:
                started = conn.start_parts(parts, size, attempt_timeout)
                if started is not None:
                    return partition, conn, started[1], started[2]
                closed = conn.is_closed
            if not closed:
                return partition, None, 0, b"".join(parts)
        started = self._rpc.start_parts(broker, parts, size, attempt_timeout)
        if started is None:
            return partition, None, 0, b"".join(parts)
        return partition, started[0], started[1], started[2]

    cdef object _general(self, topic, body, now, timeout_ms, attempt_timeout):
        partition, started = self._begin(
            topic, None, _NO_AVOID, now, body, timeout_ms, attempt_timeout)
        if isinstance(started, bytes):
            return partition, None, 0, started
        return partition, started[0], started[1], started[2]

    def answered(self, answer, partition):
        """As ``FastAttempt.answered``."""
        cdef object result = None
        cdef list counts
        cdef PyObject *found
        cdef double now
        key = self._f_partition_key.read(partition)
        if self._failures:
            self._failures.pop(key, None)
        if self._until:
            self._until.pop(key, None)
        broker_id = self._f_broker_id.read(self._f_broker.read(partition))
        try:
            if self._parser is not None:
                if PyBytes_CheckExact(answer):
                    result = self._parser._walk(answer, partition)
                if result is None:
                    result = self._parser.fallback(answer, partition)
            else:
                result = self._parse_fn(answer, partition)
        except _ServerError as exc:
            self._blocker.record(broker_id, False, self._clock(), err_code=exc.err_code)
            if exc.err_code not in _REFUSED:
                raise
            return exc
        now_obj = None  # the clock's own value, unless it is time.monotonic's (read from C)
        if self._clock is _monotonic:
            now = _monotonic_now()
        else:
            now_obj = self._clock()
            now = <double>now_obj
        found = PyDict_GetItem(self._window, broker_id)
        if (found == NULL or now >= <double>self._f_due.read(self._blocker)
                or self._unavailable or self._failing_links):
            self._blocker.record(broker_id, True, now if now_obj is None else now_obj)
        else:  # BrokerBlocker.record of a success with nothing to lift or evaluate
            counts = <list>found
            counts[0] += 1
            counts[1] += 1
        return result


cdef object _NO_AVOID = frozenset()
cdef object _REFUSED = frozenset({503, 419})  # tubemq_aio.producer._fast_attempt.REFUSED_CODES
