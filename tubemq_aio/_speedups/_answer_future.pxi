# A call's answer future whose wake-ups one read batches: ``AnswerFutures`` and ``AnswerFuture``.
# Included by _cdecode.pyx (one extension module), before _registry.pxi, which resolves them.

cdef extern from *:
    """
    /* Give a type the am_send slot (what `await` calls on the iterator it got from
       __await__): the value comes back without a StopIteration, as asyncio's own future
       iterator does. The type's async methods table is Cython's, made for __await__. */
    static int tubemq_set_am_send(PyTypeObject *t, void *fn) {
        if (t->tp_as_async == NULL) {
            PyErr_SetString(PyExc_SystemError, "no async methods table to extend");
            return -1;
        }
        ((PyAsyncMethods *)t->tp_as_async)->am_send = (sendfunc)fn;
        PyType_Modified(t);
        return 0;
    }
    """
    int tubemq_set_am_send(PyTypeObject *t, void *fn) except -1

cdef extern from *:
    """
    static PyObject *tubemq_result_name = NULL;

    /* asyncio's Task wakes up by looking `result` up with a C string (task_wakeup's
       PyObject_CallMethod): a new str each time, which misses the type's attribute cache and
       is hashed and searched for in the type's dict; the interned name hits the cache. Any
       other name goes the generic way. */
    static PyObject *tubemq_future_getattro(PyObject *self, PyObject *name) {
        if (PyUnicode_CheckExact(name) && !PyUnicode_CHECK_INTERNED(name)
                && PyUnicode_GET_LENGTH(name) == 6
                && PyUnicode_KIND(name) == PyUnicode_1BYTE_KIND
                && memcmp(PyUnicode_1BYTE_DATA(name), "result", 6) == 0) {
            return PyObject_GenericGetAttr(self, tubemq_result_name);
        }
        return PyObject_GenericGetAttr(self, name);
    }

    static int tubemq_set_getattro(PyTypeObject *t) {
        tubemq_result_name = PyUnicode_InternFromString("result");
        if (tubemq_result_name == NULL) return -1;
        t->tp_getattro = tubemq_future_getattro;
        PyType_Modified(t);
        return 0;
    }
    """
    int tubemq_set_getattro(PyTypeObject *t) except -1

from cpython.contextvars cimport PyContext_CheckExact, PyContext_Enter, PyContext_Exit
from cpython.version cimport PY_VERSION_HEX

from asyncio import CancelledError as _CancelledError
from asyncio import InvalidStateError as _InvalidStateError
from contextvars import copy_context as _copy_context
from reprlib import repr as _short_repr

cdef enum:
    _PENDING = 0
    _FINISHED = 1
    _CANCELLED = 2

cdef tuple _STATE_NAMES = ("PENDING", "FINISHED", "CANCELLED")
cdef tuple _REPR_STATES = ("pending", "finished", "cancelled")  # asyncio.Future's repr


@cython.final
cdef class AnswerFutures:
    """Makes the answer futures of one connection's calls on ``loop`` and batches their
    wake-ups: while the connection resolves the answers of one read (``SendRegistry.resolve``),
    the callbacks of every future it completes run in ONE ``loop.call_soon``, in the order the
    futures completed, each callback in its own context; an exception in one goes to
    ``loop.call_exception_handler`` and the others still run. Outside a read, a completed
    future schedules each callback with ``loop.call_soon`` as ``asyncio.Future`` does.

    Args:
        loop: the event loop the futures belong to.
    """

    cdef object _loop
    cdef object _call_soon
    cdef bint _batching
    cdef list _ready  # the futures of the open batch, once one was scheduled

    def __init__(self, loop):
        self._loop = loop
        self._call_soon = loop.call_soon

    def new(self):
        """A new pending :class:`AnswerFuture` of this loop."""
        return self._new()

    cdef inline AnswerFuture _new(self):
        cdef AnswerFuture fut = AnswerFuture.__new__(AnswerFuture)
        fut._loop = self._loop
        fut._owner = self
        return fut

    cdef inline void _open(self) noexcept:
        self._batching = True

    cdef inline void _close(self) noexcept:
        self._batching = False
        self._ready = None

    cdef int _defer(self, AnswerFuture fut) except -1:
        """Add ``fut`` (done, with callbacks) to the open batch; the batch's first future
        schedules the batch."""
        if self._ready is None:
            self._ready = [fut]
            self._call_soon(self._run, self._ready)
        else:
            self._ready.append(fut)
        return 0

    def _run(self, list ready):
        """Run the batch: every future's callbacks in order (see the class)."""
        cdef Py_ssize_t i, n = len(ready)
        cdef AnswerFuture fut
        for i in range(n):
            fut = <AnswerFuture>ready[i]
            try:
                fut._run_callbacks()
            except BaseException:  # SystemExit or KeyboardInterrupt: the rest stay scheduled
                for fut in ready[i + 1:]:
                    fut._schedule_each()
                raise


@cython.final
cdef class AnswerFuture:
    """What a Task awaits for a call's answer (made by :class:`AnswerFutures`): the
    ``asyncio.Future`` protocol a Task, ``wait_for``, ``shield``, ``gather``, ``wait`` and
    ``timeout`` use (``_asyncio_future_blocking``, ``__await__``, ``get_loop``, ``done``,
    ``cancelled``, ``result``, ``exception``, ``add_done_callback``, ``remove_done_callback``,
    ``cancel``, ``set_result``, ``set_exception``) with asyncio's outcomes and errors; its
    callbacks are batched by its maker while a read is resolved.
    """

    cdef public bint _asyncio_future_blocking
    cdef object _loop
    cdef AnswerFutures _owner
    cdef int _state
    cdef object _result
    cdef object _exception
    cdef object _exception_tb  # its traceback when set: each raise starts from it again
    cdef object _cb0  # the first callback and its context (asyncio's C future keeps it apart)
    cdef object _ctx0
    cdef list _more  # further (callback, context) pairs, or None
    cdef object _cancel_message
    cdef bint _log_tb
    cdef object __weakref__

    def __repr__(self):
        # asyncio.Future's shape, the result shortened by reprlib as there (an answer can be
        # megabytes, and this repr goes into log lines)
        state = _REPR_STATES[self._state]
        if self._state == _FINISHED:
            if self._exception is not None:
                return f"<AnswerFuture {state} exception={self._exception!r}>"
            return f"<AnswerFuture {state} result={_short_repr(self._result)}>"
        return f"<AnswerFuture {state}>"

    def __del__(self):
        if not self._log_tb or self._loop is None:
            return
        self._loop.call_exception_handler({
            "message": "AnswerFuture exception was never retrieved",
            "exception": self._exception,
            "future": self,
        })

    def get_loop(self):
        """The loop this future belongs to."""
        if self._loop is None:
            raise RuntimeError("Future object is not initialized.")
        return self._loop

    def done(self):
        """Whether a result or an exception was set, or the future was cancelled."""
        return self._state != _PENDING

    def cancelled(self):
        """Whether the future was cancelled."""
        return self._state == _CANCELLED

    def result(self):
        """The result; raises the exception set, CancelledError when cancelled,
        InvalidStateError while pending."""
        return self._get_result()

    cdef object _get_result(self):
        if self._state == _FINISHED:
            self._log_tb = False
            if self._exception is not None:
                raise self._exception.with_traceback(self._exception_tb)
            return self._result
        if self._state == _CANCELLED:
            raise self._make_cancelled_error()
        raise _InvalidStateError("Result is not ready.")

    def exception(self):
        """The exception set (None after a result); CancelledError when cancelled,
        InvalidStateError while pending."""
        if self._state == _FINISHED:
            self._log_tb = False
            return self._exception
        if self._state == _CANCELLED:
            raise self._make_cancelled_error()
        raise _InvalidStateError("Exception is not set.")

    def _make_cancelled_error(self):
        """A new CancelledError to raise (as ``asyncio.Future._make_cancelled_error``, which
        keeps none: one kept would hold the traceback of the coroutine it was raised in, whose
        frames hold this future)."""
        if self._cancel_message is None:
            return _CancelledError()
        return _CancelledError(self._cancel_message)

    def add_done_callback(self, fn, *, context=None):
        """Call ``fn(self)`` in ``context`` (a copy of the current one by default) once the
        future is done; scheduled at once with ``loop.call_soon`` when it already is."""
        if self._state != _PENDING:
            self._loop.call_soon(fn, self, context=context)
            return
        if context is None:
            context = _copy_context()
        if self._cb0 is None and self._more is None:
            self._cb0 = fn
            self._ctx0 = context
        elif self._more is None:
            self._more = [(fn, context)]
        else:
            self._more.append((fn, context))

    def remove_done_callback(self, fn):
        """Remove every pending ``fn`` callback; return how many were removed (none once the
        future is done: its callbacks are scheduled, in a batch or with the loop)."""
        cdef Py_ssize_t removed = 0
        if self._state != _PENDING:
            return 0
        if self._cb0 is not None and self._cb0 == fn:
            self._cb0 = None
            self._ctx0 = None
            removed = 1
        if self._more is not None:
            kept = [pair for pair in self._more if not pair[0] == fn]
            removed += len(self._more) - len(kept)
            if self._cb0 is None and kept:
                self._cb0, self._ctx0 = kept.pop(0)
            self._more = kept or None
        return removed

    def cancel(self, msg=None):
        """Cancel a pending future (its callbacks are scheduled); False when already done."""
        self._log_tb = False
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        self._schedule()
        return True

    def set_result(self, result):
        """Complete the future with ``result``; InvalidStateError when it is done."""
        if self._state != _PENDING:
            raise _InvalidStateError(f"{_STATE_NAMES[self._state]}: {self!r}")
        self._set_result(result)

    cdef inline int _set_result(self, object result) except -1:
        self._result = result
        self._state = _FINISHED
        if self._cb0 is not None or self._more is not None:
            self._schedule()
        return 0

    def set_exception(self, exception):
        """Complete the future with ``exception`` (an instance, or a class to instantiate);
        InvalidStateError when it is done, TypeError for a non-exception. A StopIteration is
        refused with TypeError before Python 3.13 and stored as the cause of a RuntimeError from
        3.13 on, as ``asyncio.Future`` does on each."""
        if self._state != _PENDING:
            raise _InvalidStateError(f"{_STATE_NAMES[self._state]}: {self!r}")
        if isinstance(exception, type):
            exception = exception()
        if not isinstance(exception, BaseException):
            raise TypeError("invalid exception object")
        if PY_VERSION_HEX >= 0x030D0000 and isinstance(exception, StopIteration):
            # Python 3.13's asyncio stores a RuntimeError caused by it; earlier ones refuse it.
            wrapped = RuntimeError(
                "StopIteration interacts badly with generators and cannot be raised into a Future"
            )
            wrapped.__cause__ = exception
            wrapped.__context__ = exception
            exception = wrapped
        elif type(exception) is StopIteration:
            raise TypeError(
                "StopIteration interacts badly with generators and cannot be raised into a Future"
            )
        self._exception = exception
        self._exception_tb = exception.__traceback__
        self._state = _FINISHED
        self._schedule()
        self._log_tb = True

    cdef int _schedule(self) except -1:
        """The future is done: hand its callbacks to the open batch, else to the loop."""
        if self._cb0 is None and self._more is None:
            return 0
        if self._owner is not None and self._owner._batching:
            return self._owner._defer(self)
        self._schedule_each()
        return 0

    cdef int _schedule_each(self) except -1:
        """Schedule each callback with ``loop.call_soon`` (as ``asyncio.Future`` does)."""
        cb, ctx, more = self._cb0, self._ctx0, self._more
        self._cb0 = self._ctx0 = self._more = None
        call_soon = self._loop.call_soon
        if cb is not None:
            call_soon(cb, self, context=ctx)
        if more is not None:
            for cb, ctx in more:
                call_soon(cb, self, context=ctx)
        return 0

    cdef inline int _call(self, object cb, object ctx) except -1:
        """``ctx.run(cb, self)``, entering an exact Context from C (no ``run`` looked up)."""
        if PyContext_CheckExact(ctx):
            PyContext_Enter(ctx)
            try:
                cb(self)
            finally:
                PyContext_Exit(ctx)
        else:
            ctx.run(cb, self)
        return 0

    cdef int _run_callbacks(self) except -1:
        """Run the callbacks now, in order, each in its context (in a batch)."""
        cdef Py_ssize_t i
        cdef list more
        cb, ctx, more = self._cb0, self._ctx0, self._more
        self._cb0 = self._ctx0 = self._more = None
        if cb is not None:
            try:
                self._call(cb, ctx)
            except (SystemExit, KeyboardInterrupt):
                if more is not None:
                    self._more = more
                    self._schedule_each()
                raise
            except BaseException as exc:
                self._report(cb, exc)
        if more is not None:
            for i in range(len(more)):
                cb, ctx = more[i]
                try:
                    self._call(cb, ctx)
                except (SystemExit, KeyboardInterrupt):
                    if i + 1 < len(more):
                        self._more = more[i + 1:]
                        self._schedule_each()
                    raise
                except BaseException as exc:
                    self._report(cb, exc)
        return 0

    cdef void _report(self, object cb, object exc):
        """A callback raised: tell the loop's exception handler (as a failed Handle does)."""
        self._loop.call_exception_handler({
            "message": f"Exception in callback {cb!r}({self!r})",
            "exception": exc,
            "future": self,
        })

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        if self._state == _PENDING:
            if self._asyncio_future_blocking:
                raise RuntimeError("await wasn't used with future")
            self._asyncio_future_blocking = True
            return self
        raise StopIteration(self._get_result())


cdef int _answer_send(PyObject *obj, PyObject *arg, PyObject **presult) except -1:
    """The ``am_send`` slot of :class:`AnswerFuture` (as asyncio's future iterator's): 1 with
    the future itself while it is pending (the Task waits for it), 0 with the result once it is
    done, -1 with the exception raised."""
    cdef AnswerFuture fut = <AnswerFuture>obj
    cdef object value
    presult[0] = NULL
    if fut._state == _PENDING:
        if fut._asyncio_future_blocking:
            raise RuntimeError("await wasn't used with future")
        fut._asyncio_future_blocking = True
        Py_INCREF(fut)
        presult[0] = obj
        return 1
    value = fut._get_result()
    Py_INCREF(value)
    presult[0] = <PyObject *>value
    return 0


tubemq_set_am_send(<PyTypeObject *>AnswerFuture, <void *>_answer_send)
tubemq_set_getattro(<PyTypeObject *>AnswerFuture)
