"""What a result was measured on: versions, CPU model, kernel, git revision, pinning."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _cmd(argv: Sequence[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(
            list(argv), capture_output=True, text=True, check=False, cwd=cwd, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout + out.stderr).strip()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str, repo: Path) -> str | None:
    """``git args`` in ``repo``: its output, or None when git is missing or fails (a tree that
    is not a checkout, e.g. an exported copy: git's error must not become a result's name)."""
    try:
        out = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False, cwd=repo, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_revision(repo: Path = REPO) -> str:
    """Short git revision of the tree, with ``-dirty`` when it has uncommitted changes;
    ``norev`` outside a git checkout."""
    rev = _git("rev-parse", "--short", "HEAD", repo=repo)
    if not rev:
        return "norev"
    dirty = _git("status", "--porcelain", "--untracked-files=no", repo=repo)
    return f"{rev}-dirty" if dirty else rev


def cpu_model() -> str:
    """The ``Model name`` line of ``lscpu`` (or the platform's processor string)."""
    for line in _cmd(["lscpu"]).splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def java_version() -> str | None:
    """First line of ``java -version`` (None when java is missing)."""
    if shutil.which("java") is None:
        return None
    lines = _cmd(["java", "-version"]).splitlines()
    return lines[0] if lines else None


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages."""
    with contextlib.suppress(OSError):
        return [round(x, 2) for x in os.getloadavg()]
    return []


def collect() -> dict[str, Any]:
    """Everything recorded in every result file about the machine and the software."""
    return {
        "python": platform.python_version(),
        "protobuf": _version("protobuf"),
        "uvloop": _version("uvloop"),
        "psutil": _version("psutil"),
        "tubemq_aio": _version("tubemq-aio"),
        "jdk": java_version(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "git_revision": git_revision(),
        "load_average_start": load_average(),
    }


def can_pin() -> tuple[bool, str]:
    """Whether ``taskset`` pinning (servers on CPU 0, client on CPU 1) is possible, and why not."""
    if shutil.which("taskset") is None:
        return False, "taskset not found"
    if (os.cpu_count() or 1) < 2:
        return False, "fewer than 2 CPUs"
    return True, "servers on CPU 0, client on CPU 1"


def pin_pids(pids: Sequence[int], cpu: int) -> list[str]:
    """Pin every thread of each pid to ``cpu``; return error messages (empty when all worked)."""
    errors = []
    for pid in pids:
        out = subprocess.run(
            ["taskset", "-a", "-p", "-c", str(cpu), str(pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            errors.append(f"pid {pid}: {out.stderr.strip()}")
    return errors
