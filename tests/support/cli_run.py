"""Run ``python -m tubemq_aio`` (the ``tubemq-aio`` tool) as a subprocess in integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import tubemq_aio
from tubemq_aio.cli._connect import PASSWORD_ENV

#: The source tree the subprocesses import (the same one the tests import).
SOURCE_ROOT = Path(tubemq_aio.__file__).resolve().parents[1]
#: Seconds any one CLI call may take (a consumer's group join takes ~15 s on a busy machine).
CALL_TIMEOUT = 120.0


def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess: this source tree first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH")]))
    env.pop("TUBEMQ_AIO_MASTER", None)
    return env


def cli_argv(*args: str) -> list[str]:
    """The argument vector of ``tubemq-aio ARGS``."""
    return [sys.executable, "-m", "tubemq_aio", *args]


def run_cli(
    *args: str, stdin: bytes = b"", password: str | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``tubemq-aio ARGS`` to completion with ``stdin``; output is captured.

    ``password`` is the call's ``$TUBEMQ_AIO_PASSWORD`` (None: unset, whatever this process has).
    """
    env = cli_env()
    env.pop(PASSWORD_ENV, None)
    if password is not None:
        env[PASSWORD_ENV] = password
    return subprocess.run(
        cli_argv(*args), input=stdin, capture_output=True, env=env, timeout=CALL_TIMEOUT
    )


def sigterm_after_first_line(argv: list[str]) -> tuple[bytes, bytes, bytes, int]:
    """Start ``argv``, wait for its first stdout line, send SIGTERM, wait for the exit.

    Returns:
        The first line, the rest of stdout, stderr and the exit status.
    """
    # Unbuffered: a buffered reader's readline() takes whatever lines are already in the pipe
    # into its own buffer, where communicate() (which reads the pipe itself) never sees them;
    # on a loaded machine the process has often printed (and acked) several lines by then.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), bufsize=0
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until the process has work under way
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=CALL_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return first, out, err, proc.returncode
