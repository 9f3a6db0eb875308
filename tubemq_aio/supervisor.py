"""The owner of background tasks, for our own packages on top of the SDK (the HTTP gateway).

:class:`Supervisor` is the class every SDK client owns its tasks with (heartbeats, fetch loops):
it names each task, logs a crash with its traceback, and cancels and awaits every task on
``close()``. The SDK keeps it in a private module; this module is its documented internal
surface for the applications in this repository (``docs/architecture.md``), like
:mod:`tubemq_aio.consumer.toolkit` is for the consumers' internals. It is not part of the
public API that ``docs/api.md`` promises to applications.
"""

from __future__ import annotations

from tubemq_aio._supervisor import Supervisor

__all__ = ["Supervisor"]
