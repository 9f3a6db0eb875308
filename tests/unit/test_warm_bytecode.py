"""``make unit``'s warm-up (``tests.support.warm_bytecode``): it finds the test modules whose
rewritten bytecode pytest has not cached, and after it has run pytest holds them all, under the
name and header pytest itself reads (so the warm-up does not run again for nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.warm_bytecode import main, stale


def test_stale_modules_are_found_cached_by_the_warm_up_and_found_again_when_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the rewrite is pytest's own
    tests = tmp_path / "tests"
    (tests / "unit").mkdir(parents=True)
    (tests / "integration").mkdir()
    first = tests / "test_first.py"
    second = tests / "unit" / "test_second.py"
    first.write_text("def test_one() -> None:\n    assert 1\n")
    second.write_text("def test_two() -> None:\n    assert 2\n")
    (tests / "integration" / "test_cluster.py").write_text("def test_three() -> None: ...\n")
    (tests / "helpers.py").write_text("VALUE = 1\n")

    assert stale([tests]) == [first, second]

    assert main([str(tests)]) == 0
    assert stale([tests]) == []

    second.write_text("def test_two() -> None:\n    assert 2 == 2\n")
    assert stale([tests]) == [second]
