"""Cache the compiled test modules in one process before a pytest-xdist run (``make unit``).

Every xdist worker imports every test module. When pytest has no cached rewritten bytecode for
a module (a fresh checkout, another Python version, a file just edited), each worker rewrites
and compiles it, all at the same time: for the whole tree about 4.5 CPU-seconds a worker, some
45 with ten workers on two cores (collecting a warm tree takes about 50 in all). Run as
``python -m tests.support.warm_bytecode [FOLDER ...]`` from the repository root, this collects
the stale test modules under the folders (default ``tests``, without ``tests/integration``) in
one process, which caches their bytecode and that of what they import, and collects nothing
when every module is cached (it then costs a read of each module and of its cache header).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

#: Folders left out of the scan: the integration tests are not part of ``make unit``.
SKIPPED = frozenset({"integration"})
#: How pytest names a test module's cached rewritten bytecode (``_pytest.assertion.rewrite``).
CACHE_SUFFIX = f".{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
#: The header of such a file: magic number, flags (checked source hash), the hash's 8 bytes.
HASHED_FLAGS = b"\x03\x00\x00\x00"


def rewritten_modules(folder: Path) -> Iterator[Path]:
    """The test modules under ``folder`` (``test_*.py``, which pytest rewrites), in path order,
    without those under a folder named in :data:`SKIPPED`. The few ``conftest.py`` are left to
    the workers: collecting one alone would collect its whole folder."""
    for path in sorted(folder.rglob("test_*.py")):
        if not SKIPPED.intersection(path.relative_to(folder).parts[:-1]):
            yield path


def is_cached(path: Path) -> bool:
    """Whether pytest holds rewritten bytecode of the source of ``path`` as it is now."""
    cached = path.parent / "__pycache__" / (path.stem + CACHE_SUFFIX)
    try:
        with cached.open("rb") as f:
            head = f.read(16)
    except OSError:
        return False
    source_hash = importlib.util.source_hash(path.read_bytes())
    return head == importlib.util.MAGIC_NUMBER + HASHED_FLAGS + source_hash[:8]


def stale(folders: Sequence[Path]) -> list[Path]:
    """The test modules under ``folders`` whose rewritten bytecode is missing or out of date."""
    return [path for folder in folders for path in rewritten_modules(folder) if not is_cached(path)]


def main(argv: Sequence[str]) -> int:
    """Collect the stale test modules under the folders of ``argv`` (default ``tests``) in one
    pytest process; return 0 whatever the collection found (the run that follows reports it).

    One process, not one a core: two took a third less time but a third more CPU (each
    imports what every test module imports)."""
    paths = stale([Path(arg) for arg in argv] or [Path("tests")])
    if paths:
        subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
            + [str(path) for path in paths],
            stdout=subprocess.DEVNULL,
            check=False,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
