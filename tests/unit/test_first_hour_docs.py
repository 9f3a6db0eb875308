"""The pages a new user reads first say things in the order they can be done, and what they
say about the repository's own tools matches those tools."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cli_run import SOURCE_ROOT

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
FIRST_PAGES = [SOURCE_ROOT / "README.md", SOURCE_ROOT / "docs" / "index.md"]


def _blocks(page: Path) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", FIRST_PAGES, ids=lambda p: p.name)
def test_a_cluster_is_started_before_the_first_block_that_talks_to_it(page: Path) -> None:
    """README's Python example came before the line that starts the fake: run in reading
    order it waited 5 s and failed with ``ConnectError`` (the docs test gives every block a
    fake of its own, so it passed there)."""
    blocks = _blocks(page)
    talks = next(i for i, b in enumerate(blocks) if "127.0.0.1:8715" in b and "cluster up" not in b)
    starts = next(i for i, b in enumerate(blocks) if re.search(r"tubemq-aio cluster up\b", b))
    assert starts < talks, (page.name, blocks[talks][:200])


def test_the_readme_states_the_unit_workers_the_makefile_uses() -> None:
    """README said ``make unit`` runs 6 pytest-xdist workers; the Makefile runs 10."""
    makefile = (SOURCE_ROOT / "Makefile").read_text(encoding="utf-8")
    workers = re.search(r"^UNIT_WORKERS \?= (\d+)$", makefile, re.M)
    assert workers is not None
    readme = (SOURCE_ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"(\d+) pytest-xdist workers, `UNIT_WORKERS=N`", readme)
    assert stated == [workers.group(1)]
