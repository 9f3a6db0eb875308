"""Event loops of the ``tests/faults`` folder: a test marked ``also_on_uvloop`` runs on asyncio's
loop and again on uvloop, as in ``tests/io`` (the hook of :mod:`tests.support.loops`)."""

from __future__ import annotations

from tests.support.loops import pytest_asyncio_loop_factories

__all__ = ["pytest_asyncio_loop_factories"]
