"""``tubemq-gateway dev`` as a child process: start it, read what it printed, stop it, and
check that nothing it started is left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_URL = re.compile(r"^http://127\.0\.0\.1:[0-9]+$")
_KEY = "admin key (shown once): "


@dataclass
class DevGateway:
    """A running ``tubemq-gateway dev``.

    Attributes:
        proc: the process.
        url: the base URL it printed on a line of its own.
        key: the admin key it printed.
        lines: everything it printed on stdout up to the URL.
        tmp: the temporary directory it was given (``TMPDIR``).
    """

    proc: subprocess.Popen[str]
    url: str
    key: str
    lines: list[str]
    tmp: Path

    def descendants(self) -> set[int]:
        """Process ids of every process below it (redis-server, ...), from ``/proc``."""
        found: set[int] = set()
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    children = (task / "children").read_text().split()
                except OSError:
                    continue
                for child in map(int, children):
                    if child not in found:
                        found.add(child)
                        todo.append(child)
        return found

    def stop(self, sig: signal.Signals = signal.SIGINT, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit status."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def dev_env(tmp: Path, port: int = 0) -> dict[str, str]:
    """The environment of a dev gateway under test: ``TMPDIR=tmp``, the port, this checkout's
    ``tubemq_aio`` first on the import path and this interpreter's scripts on ``PATH``."""
    return {
        **os.environ,
        "TMPDIR": str(tmp),
        "TUBEMQ_GATEWAY_PORT": str(port),
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def start_dev(
    args: list[str],
    tmp: Path,
    timeout: float = 60.0,
    *,
    shell: str | None = None,
    cwd: Path = ROOT,
    port: int = 0,
) -> DevGateway:
    """Run ``tubemq-gateway dev *args`` (or the ``shell`` command line, through bash) on
    ``port`` (0: a free one) with ``TMPDIR=tmp``; return once it printed its URL.

    Raises:
        AssertionError: it exited or printed no URL within ``timeout`` (its output attached).
    """
    tmp.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "tubemq_aio.gateway", "dev", *args]
    if shell is not None:
        argv = ["bash", "-c", f"exec {shell}"]  # exec: the signal reaches the gateway itself
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dev_env(tmp, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    key = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith(_KEY):
            key = line[len(_KEY) :].strip()
        if _URL.match(line.strip()):
            return DevGateway(proc, line.strip(), key, lines, tmp)
    proc.kill()
    rest = proc.communicate(timeout=10)[0]
    raise AssertionError("dev printed no URL:\n" + "\n".join(lines) + rest)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
