"""Download the TubeMQ server runtime (jars) with Maven into a reusable cache directory."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from importlib import resources
from pathlib import Path

from tubemq_aio.testing._errors import RuntimeResolveError, ToolNotFoundError
from tubemq_aio.testing._versions import ServerVersion, server_version

__all__ = [
    "CORE_VERSION",
    "DEFAULT_VERSION",
    "cache_root",
    "find_tool",
    "resolve_runtime",
]

#: tubemq-server version run by default (see docs/local-cluster.md for why).
DEFAULT_VERSION = "2.4.0"
#: tubemq-core / tubemq-client version paired with it (newest on Maven Central).
CORE_VERSION = "1.13.0"

_COPY_DEPS = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
# 2.8's `copy` resolves the bare jar without reading its POM, whose parent is not published.
_COPY_ONE = "org.apache.maven.plugins:maven-dependency-plugin:2.8:copy"
_MARKER = ".complete"
_LOCKS: dict[Path, asyncio.Lock] = {}


def cache_root() -> Path:
    """Return the cache root: ``$TUBEMQ_AIO_CACHE`` or ``~/.cache/tubemq-aio``.

    Returns:
        The directory (not necessarily existing yet).
    """
    env = os.environ.get("TUBEMQ_AIO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tubemq-aio"


def find_tool(name: str, hint: str) -> str:
    """Locate an executable on ``PATH`` (or accept an explicit path).

    Args:
        name: Program name or path, e.g. ``"java"``.
        hint: What to tell the user when it is missing.

    Returns:
        The absolute path of the program.

    Raises:
        ToolNotFoundError: If it cannot be found or is not executable.
    """
    found = shutil.which(name)
    if found is None:
        raise ToolNotFoundError(f"required program {name!r} not found on PATH: {hint}")
    return found


def _pom_path(lib_dir: Path, spec: ServerVersion) -> Path:
    pom = lib_dir.parent / spec.pom
    text = resources.files("tubemq_aio.testing").joinpath(spec.pom).read_text("utf-8")
    pom.write_text(text, encoding="utf-8")
    return pom


def _maven_runs(mvn: str, pom: Path, spec: ServerVersion, staging: Path) -> list[list[str]]:
    """Return the Maven command lines that fill ``staging`` for ``spec`` (run in order)."""
    out = f"-DoutputDirectory={staging}"
    props = [f"-D{k}={v}" for k, v in spec.pom_properties.items()]
    server = f"org.apache.inlong:tubemq-server:{spec.version}"
    first = [mvn, "-B", "-f", str(pom), *props, _COPY_DEPS, _COPY_ONE, f"-Dartifact={server}:jar"]
    runs = [[*first, out, "-DincludeScope=runtime"]]
    runs += [
        [mvn, "-B", "-f", str(pom), _COPY_ONE, f"-Dartifact={a}:jar", out] for a in spec.plain_jars
    ]
    return runs


async def _run_maven(args: list[str], log_file: Path, cwd: Path, timeout: float) -> int | None:
    """Run one Maven command, appending to ``log_file``; None when ``timeout`` expired."""
    with log_file.open("ab") as log:
        log.write((" ".join(args) + "\n").encode())
        log.flush()
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, cwd=cwd
        )
        try:
            async with asyncio.timeout(timeout):
                return await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return None
        except BaseException:
            proc.kill()
            await proc.wait()
            raise


async def resolve_runtime(
    version: str = DEFAULT_VERSION,
    *,
    cache_dir: Path | None = None,
    mvn: str = "mvn",
    timeout: float = 900.0,
) -> Path:
    """Make sure the server runtime for ``version`` is in the cache and return its lib dir.

    The first call downloads ~35 MB of jars from Maven Central (about a minute); later calls
    return at once. A marker file records a complete download, so an interrupted one is redone.

    Args:
        version: tubemq-server version, a key of ``SERVER_VERSIONS`` (1.x versions also get
            their tubemq-core jar and the ZooKeeper server).
        cache_dir: Cache root (default :func:`cache_root`).
        mvn: Maven executable name or path.
        timeout: Seconds allowed for Maven.

    Returns:
        Directory holding every jar of the classpath (use ``<dir>/*``).

    Raises:
        UnsupportedVersionError: If the harness cannot run ``version``.
        ToolNotFoundError: If Maven is missing.
        RuntimeResolveError: If Maven fails or times out; names the Maven log.
    """
    spec = server_version(version)
    base = (cache_dir or cache_root()) / version
    lib_dir = base / "lib"
    if (lib_dir / _MARKER).exists():
        return lib_dir
    lock = _LOCKS.setdefault(base, asyncio.Lock())
    async with lock:
        if (lib_dir / _MARKER).exists():
            return lib_dir
        mvn_path = find_tool(mvn, "install Maven (`make system-deps` does it on Debian)")
        base.mkdir(parents=True, exist_ok=True)
        staging = base / f"lib.partial-{os.getpid()}-{time.monotonic_ns()}"
        log_file = base / "maven.log"
        log_file.write_bytes(b"")
        deadline = time.monotonic() + timeout
        rc: int | None = 0
        try:
            for args in _maven_runs(mvn_path, _pom_path(lib_dir, spec), spec, staging):
                rc = await _run_maven(args, log_file, base, max(deadline - time.monotonic(), 1.0))
                if rc != 0:
                    break
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if rc is None:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeResolveError(
                f"Maven did not finish resolving tubemq-server {version} in {timeout:.0f}s",
                log_file,
            )
        server_jar = staging / f"tubemq-server-{version}.jar"
        if rc != 0 or not server_jar.exists():
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeResolveError(
                f"Maven could not resolve org.apache.inlong:tubemq-server:{version} "
                f"and its runtime dependencies (exit code {rc})",
                log_file,
            )
        (staging / _MARKER).write_text(version, encoding="utf-8")
        if (lib_dir / _MARKER).exists():  # another process finished first
            shutil.rmtree(staging, ignore_errors=True)
        else:
            shutil.rmtree(lib_dir, ignore_errors=True)
            staging.rename(lib_dir)
    return lib_dir
