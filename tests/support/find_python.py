"""Where a Python X.Y interpreter is, for ``make test-pythons`` (docs/testing.md, "Other Python
versions"): ``python -m tests.support.find_python 3.12`` prints its path, or says on stderr that
there is none and exits 1 (the target fails then; a missing version is never skipped).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: A version as the target names it: major.minor.
VERSION = re.compile(r"3\.\d+")


def runs(path: str, version: str) -> bool:
    """Whether ``path`` starts and is Python ``version`` (a pyenv shim of a version that is not
    enabled exits with an error)."""
    check = f"import sys; sys.exit(sys.version.split()[0].rsplit('.', 1)[0] != {version!r})"
    try:
        done = subprocess.run([path, "-c", check], capture_output=True, timeout=60, check=False)
    except OSError:
        return False
    return done.returncode == 0


def pyenv_root() -> Path:
    """``$PYENV_ROOT``, else ``~/.pyenv``."""
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def candidates(version: str) -> list[str]:
    """``pythonX.Y`` on PATH, then pyenv's ``X.Y.*`` installs, newest patch release first."""
    found = []
    on_path = shutil.which(f"python{version}")
    if on_path is not None:
        found.append(on_path)
    installs = (pyenv_root() / "versions").glob(f"{version}.*")
    patches = [p for p in installs if p.name[len(version) + 1 :].isdigit()]
    patches.sort(key=lambda p: int(p.name[len(version) + 1 :]), reverse=True)
    found.extend(str(p / "bin" / f"python{version}") for p in patches)
    return found


def find(version: str) -> str | None:
    """The first of :func:`candidates` that :func:`runs`, or None.

    Raises:
        ValueError: ``version`` is not ``3.N``.
    """
    if not VERSION.fullmatch(version):
        raise ValueError(f"a Python version is 3.N, got {version!r}")
    return next((path for path in candidates(version) if runs(path, version)), None)


def main(argv: list[str]) -> int:
    """Print the interpreter of ``argv[0]``'s version; 1, with the reason on stderr, if none."""
    (version,) = argv
    path = find(version)
    if path is None:
        print(
            f"error: no Python {version}: python{version} is not on PATH and pyenv "
            f"({pyenv_root()}) has no {version}.* install. Install it (pyenv install {version}) "
            f"or name it: make test-pythons PYTHON_{version}=/path/to/python{version}",
            file=sys.stderr,
        )
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
