"""The repository's Python files as syntax trees, each parsed once per test process.

The tests that read the source rather than run it (``test_layering``, ``test_error_homes``,
``test_suite_layout``) walk the same few hundred files; parsing them was most of their cost, paid
again by every test. ``tests/xdist_groups.py`` runs those files on one worker, so that worker
parses each file once, and frees them when the session ends (:func:`forget_source_trees`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def source_tree(path: Path) -> ast.Module:
    """The syntax tree of the Python file at ``path``, shared: callers read it, never change it.

    Parsed again when the file's size or modification time changed (a test may write a file
    of its own at a path it reuses). Raises ``SyntaxError`` for a file that does not parse and
    ``OSError`` for one that cannot be read.
    """
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:
    del mtime_ns, size  # only part of the cache key
    return ast.parse(path.read_text(), filename=str(path))


def forget_source_trees() -> None:
    """Drop every kept tree (``tests/conftest.py`` calls it when the session finishes).

    Several hundred syntax trees left alive to interpreter shutdown cost that worker about
    4 CPU-seconds of finalization (measured on Python 3.11, against 0.15 s to free them here);
    with eight workers on two cores that ran past pytest-xdist's 10 s exit wait.
    """
    _parsed.cache_clear()
