"""The repository's Python files as syntax trees, each parsed once per test process.

The tests that read the source rather than run it (``test_layering``, ``test_error_homes``,
``test_suite_layout``) walk the same few hundred files; parsing them was most of their cost, paid
again by every test. ``tests/xdist_groups.py`` runs those files on one worker, so that worker
parses each file once.
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
