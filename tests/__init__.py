"""The test suite of tubemq-aio: a package tree, so that every module, each folder's
``conftest.py`` included, has a name of its own (see docs/testing.md)."""
