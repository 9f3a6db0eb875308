"""``make test-pythons`` finds each Python version's interpreter, or fails naming the missing
one (``tests/support/find_python.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.find_python import candidates, find, main


@pytest.fixture
def pyenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty pyenv root, and a PATH with no interpreter on it."""
    root = tmp_path / "pyenv"
    (root / "versions").mkdir(parents=True)
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return root


def _install(root: Path, name: str, target: str) -> Path:
    binary = root / "versions" / name / "bin" / f"python{name.rsplit('.', 1)[0]}"
    binary.parent.mkdir(parents=True)
    binary.symlink_to(target)
    return binary


def test_pyenv_installs_come_newest_patch_first(pyenv: Path) -> None:
    for name in ("3.12.1", "3.12.10", "3.12.9"):
        _install(pyenv, name, "/nonexistent")
    (pyenv / "versions" / "3.12-dev").mkdir()
    (pyenv / "versions" / "3.13.0").mkdir()
    assert candidates("3.12") == [
        str(pyenv / "versions" / name / "bin" / "python3.12")
        for name in ("3.12.10", "3.12.9", "3.12.1")
    ]


def test_the_first_candidate_that_runs_as_that_version_is_found(pyenv: Path) -> None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    _install(pyenv, f"{version}.99", "/nonexistent")
    works = _install(pyenv, f"{version}.0", sys.executable)
    assert find(version) == str(works)


def test_a_missing_version_fails_naming_it(pyenv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert find("3.99") is None
    assert main(["3.99"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "no Python 3.99" in err
    assert "PYTHON_3.99=" in err


def test_a_version_is_major_dot_minor(pyenv: Path) -> None:
    with pytest.raises(ValueError, match=r"3\.N"):
        find("3.12.1")
