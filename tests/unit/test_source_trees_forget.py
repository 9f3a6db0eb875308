"""The kept syntax trees are freed at the end of the session (tests/support/source_trees.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import source_trees
from tests.support.source_trees import forget_source_trees, source_tree


def test_forgetting_drops_every_kept_tree() -> None:
    source_tree(Path(source_trees.__file__))
    assert source_trees._parsed.cache_info().currsize > 0
    forget_source_trees()
    assert source_trees._parsed.cache_info().currsize == 0
