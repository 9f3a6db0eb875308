"""Helpers that test modules import as ``from tests.support.<module> import ...``; fixtures
live in the ``conftest.py`` of the folders that use them (see docs/testing.md)."""
