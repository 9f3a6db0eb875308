# A named field of a slotted object read and written from its slot: ``_Field``.
# Included by _cdecode.pyx (one extension module), after _produce.pxi (``_slot``).

cdef extern from *:
    """
    /* Store a new reference to value in the object slot at offset, releasing the old one. */
    static void tubemq_slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **slot = (PyObject **)((char *)obj + offset);
        PyObject *old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old);
    }
    """
    void tubemq_slot_set(PyObject *obj, Py_ssize_t offset, object value)


cdef class _Field:
    """One named field read (and counted up) straight in its slot when the object is of the
    class it was learned on (a slotted class: ``Partition``, ``Broker``, ``TopicMeta``,
    ``TokenState``, ``BrokerBlocker``, ``TransportStats``), else as Python reads and writes
    it. Learned again when the class changes."""

    cdef str name
    cdef PyTypeObject *type
    cdef Py_ssize_t offset
    cdef object cls  # keeps the learned class (and so its layout) alive

    def __init__(self, str name):
        self.name = name
        self.type = NULL
        self.offset = -1

    cdef inline object read(self, object obj):
        cdef PyObject *value
        if <PyTypeObject *>Py_TYPE(obj) != self.type:
            self._learn(obj)
        if self.offset >= 0:
            value = _slot(<PyObject *>obj, self.offset)
            if value != NULL:
                return <object>value
        return getattr(obj, self.name)

    cdef void _learn(self, object obj):
        cls = type(obj)
        self.cls = cls
        self.type = <PyTypeObject *>cls
        descr = None
        for klass in cls.__mro__:
            descr = vars(klass).get(self.name)
            if descr is not None:
                break
        self.offset = -1 if descr is None else tubemq_slot_offset(descr)

    cdef inline int add(self, object obj, long n) except -1:
        """``obj.<name> += n``, in its slot when learned (as ``read``)."""
        cdef PyObject *value
        if <PyTypeObject *>Py_TYPE(obj) != self.type:
            self._learn(obj)
        if self.offset >= 0:
            value = _slot(<PyObject *>obj, self.offset)
            if value != NULL:
                tubemq_slot_set(<PyObject *>obj, self.offset, <object>value + n)
                return 0
        setattr(obj, self.name, getattr(obj, self.name) + n)
        return 0
