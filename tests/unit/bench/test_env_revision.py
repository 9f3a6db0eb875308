"""The git revision a benchmark result is named after."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.harness.env import REPO, git_revision


def test_a_tree_outside_a_checkout_is_norev(tmp_path: Path) -> None:
    assert git_revision(tmp_path) == "norev"


def test_the_checkout_gives_its_short_revision() -> None:
    assert re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", git_revision(REPO))
