"""One server JVM as a child process: spawn, stop (SIGTERM then SIGKILL), kill, log tails.

Safety nets against orphan JVMs, from first to last resort:

1. :class:`LocalCluster` stops its processes on exit, on error and on cancellation (Ctrl-C).
2. An ``atexit`` hook SIGKILLs any process still registered when the interpreter exits.
3. Managed (non-detached) JVMs get ``PR_SET_PDEATHSIG=SIGKILL``: Linux kills them when the
   Python process dies, even by SIGKILL.

Processes are plain :class:`subprocess.Popen` objects watched by polling, not asyncio
subprocesses, so a cluster is bound to no event loop: a session-scoped pytest fixture can start
it in one loop and function-scoped tests can stop, kill and restart nodes from theirs.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["JavaProcess", "kill_pid", "option_args", "pid_alive", "tail"]

_LIVE: set[JavaProcess] = set()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def pid_alive(pid: int) -> bool:
    """Tell whether ``pid`` exists and is not a zombie.

    Args:
        pid: Process id.

    Returns:
        True if the process is running.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``pid``'s process group (JVMs lead their own), ignoring dead ones.

    Args:
        pid: Process id (also the process group id of a JVM spawned here).
        sig: Signal number.
    """
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def option_args(options: Mapping[str, str]) -> tuple[str, ...]:
    """Command-line options as ``[name, value, ...]`` in the mapping's order (written as a
    mapping, each option stays next to its value)."""
    return tuple(part for pair in options.items() for part in pair)


def tail(path: Path, lines: int = 40) -> str:
    """Return the last ``lines`` lines of a text file ('' if it does not exist).

    Args:
        path: File to read.
        lines: How many lines.

    Returns:
        The tail.
    """
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill_now()


class JavaProcess:
    """A JVM started from ``argv`` with stdout+stderr appended to ``out_file``.

    Args:
        name: Short name used in messages, e.g. ``"broker1"``.
        argv: Full command line.
        out_file: File receiving stdout and stderr.
        cwd: Working directory.
        detached: If True, the JVM survives this Python process (no parent-death signal, not
            killed at interpreter exit); used by the ``up`` CLI.
        env: The process's whole environment; default this process's.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        out_file: Path,
        cwd: Path,
        detached: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Store the command (see class docstring); nothing is started yet."""
        self.name = name
        self.argv = list(argv)
        self.out_file = out_file
        self.cwd = cwd
        self.detached = detached
        self.env = None if env is None else dict(env)
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """True while the JVM is alive."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    @property
    def returncode(self) -> int | None:
        """Exit status once the process has ended (None while running or if unknown)."""
        return None if self._proc is None else self._proc.poll()

    def spawn(self) -> None:
        """Start the JVM (returns as soon as the process exists; Popen is not tied to a loop)."""
        self.out_file.parent.mkdir(parents=True, exist_ok=True)
        with self.out_file.open("ab") as out:
            out.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} start {self.name}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                preexec_fn=None if self.detached else _die_with_parent,
            )
        self.pid = self._proc.pid
        if not self.detached:
            _LIVE.add(self)

    async def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def stop(self, timeout: float = 15.0) -> None:
        """Stop gracefully: SIGTERM, then SIGKILL after ``timeout`` seconds.

        Args:
            timeout: Seconds to wait for a clean exit.
        """
        if self.pid is None:
            return
        if self.running:
            kill_pid(self.pid, signal.SIGTERM)
            if not await self._wait_exit(timeout):
                kill_pid(self.pid, signal.SIGKILL)
                await self._wait_exit(10.0)
        self._forget()

    async def kill(self) -> None:
        """Kill at once with SIGKILL and reap the process."""
        if self.pid is None:
            return
        kill_pid(self.pid, signal.SIGKILL)
        await self._wait_exit(10.0)
        self._forget()

    def kill_now(self) -> None:
        """SIGKILL without waiting (for synchronous emergency cleanup); no-op once exited."""
        if self.pid is not None and self.running:
            kill_pid(self.pid, signal.SIGKILL)

    def _forget(self) -> None:
        _LIVE.discard(self)

    def __repr__(self) -> str:
        """Show name, pid and state."""
        state = "running" if self.running else "stopped"
        return f"<JavaProcess {self.name} pid={self.pid} {state}>"
