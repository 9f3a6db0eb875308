"""The console commands ``tubemq-aio`` and ``tubemq-gateway`` (pyproject's ``[project.scripts]``).

They live outside the ``tubemq_aio`` package on purpose: a command's wrapper imports its entry
module before running any code of the command, and ``tubemq_aio``'s import is the whole client (the
gateway's entry module adds its FastAPI app: over a second of start-up). A Ctrl-C in that time used
to end in a Python traceback. Here the heavy import happens inside the handler, so a Ctrl-C at any
moment of the start-up ends as one later does: status 130 (128 + SIGINT, as a shell reports it) and
one short line on stderr. ``python -m tubemq_aio`` imports the package before any of this runs.
"""

from __future__ import annotations

import sys

__all__ = ["cli", "gateway"]

#: The status of a command ended by Ctrl-C (the CLI's ``EXIT_INTERRUPTED``, which this module
#: cannot import without importing the package first).
_INTERRUPTED = 130


def _interrupted(line: str) -> int:
    print(line, file=sys.stderr, flush=True)
    return _INTERRUPTED


def cli() -> int:
    """Run ``tubemq-aio`` (:func:`tubemq_aio.cli.main`) with ``sys.argv``.

    Returns:
        The process exit status; 130 after a Ctrl-C the command did not handle itself (one
        during its imports), with the command's own line ``tubemq-aio: error: interrupted``.
    """
    try:
        from tubemq_aio.cli import main

        return main()
    except KeyboardInterrupt:
        return _interrupted("tubemq-aio: error: interrupted")


def gateway() -> int:
    """Run ``tubemq-gateway`` (:func:`tubemq_aio.gateway.__main__.main`) with ``sys.argv``.

    Returns:
        The process exit status; 130 after a Ctrl-C the command did not handle itself (one
        during its imports, before the server runs), with the line ``tubemq-gateway:
        interrupted``. A Ctrl-C once it serves stops the server, whose status it is.
    """
    try:
        from tubemq_aio.gateway.__main__ import main

        return main()
    except KeyboardInterrupt:
        return _interrupted("tubemq-gateway: interrupted")
