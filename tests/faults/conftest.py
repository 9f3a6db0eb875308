"""Event loops of the ``tests/faults`` folder: a test marked ``also_on_uvloop`` runs on asyncio's
loop and again on uvloop, as in ``tests/io`` (whose hook this folder shares)."""

from __future__ import annotations

from tests.io.conftest import pytest_asyncio_loop_factories

__all__ = ["pytest_asyncio_loop_factories"]
