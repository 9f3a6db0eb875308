"""Build the Java and Go benchmark peers (``python -m benchmarks.peers.build``).

Both builds are idempotent: a peer is rebuilt only when one of its inputs is newer than its
output (or with ``--force``). Outputs, both git-ignored:

* Java: ``benchmarks/peers/java/target/tubemq-benchpeer.jar`` + ``target/lib/*.jar``
  (``mvn -B -q -f benchmarks/peers/java/pom.xml package``).
* Go: ``benchmarks/peers/go/bin/benchpeer`` (``go build -trimpath -o bin/benchpeer .``).

The Go client module has no release tags, so ``go.mod`` requires it at a pseudo-version, fetched
through the Go module proxy like any other module. The proxy this project reaches refuses that
version (403, "not available"), so by default the Go peer cannot be built here and the build says
so plainly. With ``--go-client-src DIR`` (or ``TUBEMQ_GO_CLIENT_SRC``) pointing at a local copy of
the module's source (``GO_CLIENT_SUBDIR`` of an apache/inlong checkout at ``GO_CLIENT_COMMIT`` or
later), the peer is built in a scratch copy whose ``go.mod`` replaces the module by that
directory; the module's own dependencies still come from the module proxy.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
JAVA_DIR = PEERS_DIR / "java"
GO_DIR = PEERS_DIR / "go"

JAVA_JAR = JAVA_DIR / "target" / "tubemq-benchpeer.jar"
JAVA_LIB = JAVA_DIR / "target" / "lib"
JAVA_MAIN_CLASS = "tubemqaio.benchpeer.Peer"
#: Field-by-field interop tool used by the integration tests (dump / produce with attributes).
JAVA_INTEROP_CLASS = "tubemqaio.benchpeer.Interop"
GO_BINARY = GO_DIR / "bin" / "benchpeer"
#: Where the Go client library writes its log file (it defaults to ``../log`` of the cwd).
GO_LOG_DIR = GO_DIR / "bin" / "log"
#: A directory holding the Go client module's source, used instead of the module proxy.
GO_CLIENT_SRC_ENV = "TUBEMQ_GO_CLIENT_SRC"
#: Next to the binary when it was built against a local client source: that directory.
GO_SOURCE_MARK = GO_DIR / "bin" / "benchpeer.source"

GO_CLIENT_MODULE = "github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go"
GO_CLIENT_VERSION = "v0.0.0-20241206111749-1183e43b4425"
GO_CLIENT_COMMIT = "1183e43b442558139169ab981a7d35c60860d859"
GO_CLIENT_TIME = "2024-12-06T11:17:49Z"
GO_CLIENT_SUBDIR = "inlong-tubemq/tubemq-client-twins/tubemq-client-go"

# JVM options for the Java peer (Java 17; the client needs no add-opens). With 1 GB of heap it
# ran out of memory ("GC overhead limit exceeded") in e2e at 10 KB x 10 000 msg/s.
JAVA_OPTS = ("-Xms256m", "-Xmx2g", "-XX:+UseParallelGC")


class BuildError(RuntimeError):
    """A peer could not be built; the message says why and what to do."""


def _log(msg: str) -> None:
    print(f"[peers.build] {msg}", file=sys.stderr, flush=True)


def _newest_mtime(paths: Iterable[Path]) -> float:
    newest = 0.0
    for path in paths:
        if path.is_dir():
            for sub in path.rglob("*"):
                if sub.is_file():
                    newest = max(newest, sub.stat().st_mtime)
        elif path.exists():
            newest = max(newest, path.stat().st_mtime)
    return newest


def _up_to_date(output: Path, inputs: Iterable[Path]) -> bool:
    return output.exists() and output.stat().st_mtime >= _newest_mtime(inputs)


def _require_tool(name: str, hint: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise BuildError(f"`{name}` was not found on PATH: {hint}")
    return exe


def _run(cmd: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> str:
    _log(f"$ (cd {cwd}) {' '.join(cmd)}")
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise BuildError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


# ---------------------------------------------------------------------------------------- Java


def build_java(force: bool = False) -> Path:
    """Build the Java peer; return the path of its jar."""
    inputs = [JAVA_DIR / "pom.xml", JAVA_DIR / "src"]
    if not force and _up_to_date(JAVA_JAR, inputs) and JAVA_LIB.is_dir():
        _log(f"java peer up to date: {JAVA_JAR}")
        return JAVA_JAR
    mvn = _require_tool("mvn", "install Maven 3 and a JDK >= 17 (Debian: maven, openjdk-17-jdk)")
    _require_tool("java", "install a JDK >= 17")
    if JAVA_LIB.is_dir():
        shutil.rmtree(JAVA_LIB)  # drop jars of an older dependency set
    try:
        _run([mvn, "-B", "-q", "-f", str(JAVA_DIR / "pom.xml"), "package"], cwd=JAVA_DIR)
    except BuildError as exc:
        raise BuildError(
            f"Maven build of the Java peer failed; if an artifact could not be downloaded, "
            f"check that the Maven repository is reachable.\n{exc}"
        ) from exc
    if not JAVA_JAR.exists():
        raise BuildError(f"Maven finished but {JAVA_JAR} is missing")
    JAVA_JAR.touch()
    return JAVA_JAR


def java_command(
    args: Sequence[str],
    jvm_opts: Sequence[str] = JAVA_OPTS,
    main_class: str = JAVA_MAIN_CLASS,
) -> list[str]:
    """Command line running a class of the Java peer jar with ``args``.

    Args:
        args: the program arguments (e.g. ``["produce", "--topic", ...]``).
        jvm_opts: JVM options.
        main_class: :data:`JAVA_MAIN_CLASS` (benchmark peer) or :data:`JAVA_INTEROP_CLASS`.
    """
    classpath = os.pathsep.join([str(JAVA_JAR), str(JAVA_LIB / "*")])
    return ["java", *jvm_opts, "-cp", classpath, main_class, *args]


# ------------------------------------------------------------------------------------------ Go


def _proxy_answer(text: str) -> str:
    """The module proxy's refusal in ``go``'s output (status and server response), without the
    proxy's address: e.g. ``403 Forbidden: This module version is not available.``."""
    status = re.search(r": (\d{3} [A-Za-z ]+)\s*$", text, re.MULTILINE)
    answer = re.search(r"server response: (.+)$", text, re.MULTILINE)
    parts = [m.group(1).strip() for m in (status, answer) if m is not None]
    return ": ".join(parts) or "an error"


def go_build_source() -> str | None:
    """How the existing Go peer binary was built: ``"module proxy"``, ``"local source"``, or
    None when there is no binary."""
    if not GO_BINARY.exists():
        return None
    return "local source" if GO_SOURCE_MARK.exists() else "module proxy"


def build_go(force: bool = False, client_src: Path | None = None) -> Path:
    """Build the Go peer; return the path of its binary.

    A binary built against a local client source is only reused while that same source is
    given; without one the build goes through the module proxy again (and says it is blocked
    when the proxy refuses the module), so a run's Go figures never come from a source it did
    not ask for.

    Args:
        force: rebuild even if the binary is newer than the peer's sources.
        client_src: the Go client module's source directory to build against instead of the
            module proxy (default: ``$TUBEMQ_GO_CLIENT_SRC`` when set).
    """
    if client_src is None and os.environ.get(GO_CLIENT_SRC_ENV):
        client_src = Path(os.environ[GO_CLIENT_SRC_ENV])
    if client_src is not None:
        client_src = client_src.expanduser().resolve()
    inputs = [GO_DIR / "main.go", GO_DIR / "go.mod", GO_DIR / "go.sum"]
    built_from = GO_SOURCE_MARK.read_text().strip() if GO_SOURCE_MARK.exists() else None
    if client_src is not None:
        inputs.append(client_src)
    same_source = built_from == (None if client_src is None else str(client_src))
    if not force and same_source and _up_to_date(GO_BINARY, inputs):
        _log(f"go peer up to date: {GO_BINARY}")
        return GO_BINARY
    go = _require_tool("go", "install a Go toolchain >= 1.21")
    env = dict(os.environ)
    GO_BINARY.parent.mkdir(parents=True, exist_ok=True)
    GO_LOG_DIR.mkdir(parents=True, exist_ok=True)
    if client_src is not None:
        return _build_go_replaced(go, client_src, env)
    try:
        _run([go, "build", "-mod=readonly", "-trimpath", "-o", str(GO_BINARY), "."], GO_DIR, env)
    except BuildError as exc:
        text = str(exc)
        if GO_CLIENT_MODULE in text and ("403" in text or "404" in text or "410" in text):
            raise BuildError(
                f"the Go module proxy does not serve {GO_CLIENT_MODULE}@{GO_CLIENT_VERSION} "
                f"(it answers {_proxy_answer(text)}), so the Go peer cannot be built on this "
                f"machine (a local copy of the module can be used: --go-client-src DIR or "
                f"${GO_CLIENT_SRC_ENV}).\n{text}"
            ) from exc
        raise
    GO_SOURCE_MARK.unlink(missing_ok=True)
    return GO_BINARY


def _build_go_replaced(go: str, client_src: Path, env: Mapping[str, str]) -> Path:
    """Build the peer in a scratch copy whose go.mod replaces the client module by a directory."""
    if not (client_src / "go.mod").is_file():
        raise BuildError(f"{client_src} holds no go.mod of {GO_CLIENT_MODULE}")
    with tempfile.TemporaryDirectory(prefix="benchpeer-go-") as scratch:
        work = Path(scratch)
        for name in ("main.go", "go.mod", "go.sum"):
            shutil.copy2(GO_DIR / name, work / name)
        _run([go, "mod", "edit", f"-replace={GO_CLIENT_MODULE}={client_src}"], work, env)
        _run([go, "mod", "tidy"], work, env)
        _run([go, "build", "-trimpath", "-o", str(GO_BINARY), "."], work, env)
    GO_SOURCE_MARK.write_text(f"{client_src}\n")
    _log(f"go peer built against the local client source {client_src}")
    return GO_BINARY


def go_command(args: Sequence[str]) -> list[str]:
    """Command line running the Go peer with ``args`` (e.g. ``["produce", "-topic", ...]``)."""
    return [str(GO_BINARY), *args]


# ----------------------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.build", description=__doc__)
    parser.add_argument("--java", action="store_true", help="build only the Java peer")
    parser.add_argument("--go", action="store_true", help="build only the Go peer")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument(
        "--go-client-src",
        type=Path,
        help="directory of the Go client module's source, used instead of the module proxy",
    )
    ns = parser.parse_args(argv)
    both = not ns.java and not ns.go
    failures: list[str] = []
    if ns.java or both:
        try:
            print(build_java(force=ns.force))
        except BuildError as exc:
            failures.append(f"java peer: {exc}")
    if ns.go or both:
        try:
            print(build_go(force=ns.force, client_src=ns.go_client_src))
        except BuildError as exc:
            failures.append(f"go peer: {exc}")
    for failure in failures:
        _log("ERROR " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
