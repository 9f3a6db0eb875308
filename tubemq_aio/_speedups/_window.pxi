# The producer's send window count, typed: ``tubemq_aio.producer._window.WindowSlots`` compiled.
# Included by _cdecode.pyx (one extension module).


cdef class WindowSlots:
    """``tubemq_aio.producer._window.WindowSlots`` compiled: the same fields (set by
    ``SendWindow``) and the same ``try_acquire`` and ``release``."""

    cdef public Py_ssize_t limit
    cdef public Py_ssize_t borrowed
    cdef public object _waiters
    cdef public object _drained

    def try_acquire(self):
        """As ``WindowSlots.try_acquire``."""
        if self.borrowed < self.limit and not self._waiters:
            self.borrowed += 1
            return True
        return False

    def release(self):
        """As ``WindowSlots.release``."""
        self.borrowed -= 1
        if self._waiters:
            self._wake_one()
        elif not self.borrowed and self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    def _wake_one(self):
        waiters = self._waiters
        while waiters and self.borrowed < self.limit:
            waiter = waiters.popleft()
            if not waiter.done():
                self.borrowed += 1
                waiter.set_result(None)
                return
