"""Running a Node.js test script (the gateway's clients in another language)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


@asynccontextmanager
async def node_script(script: Path, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``node script args…`` with its stdout and stderr piped; killed after if still running.

    Raises:
        AssertionError: Node.js is not installed (Debian package nodejs; ``make test``
            installs it).
    """
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (Debian package nodejs; `make test` installs it)"
    proc = await asyncio.create_subprocess_exec(
        node, str(script), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
