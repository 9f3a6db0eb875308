"""Regenerate, or check, the committed protobuf modules in ``tubemq_aio/protocol/pb``.

Usage::

    python -m tubemq_aio.protocol.pb.generate          # write *_pb2.py / *_pb2.pyi (make protos)
    python -m tubemq_aio.protocol.pb.generate --check  # fail if they are stale (make protos-check)

The script runs ``grpc_tools.protoc`` on every ``protos/*.proto`` with ``--python_out`` and
``--pyi_out``, then turns protoc's top-level cross-file imports (``import RPC_pb2 as ...``) into
package-relative ones, so that ``from tubemq_aio.protocol.pb import MasterService_pb2`` works
without ``pb`` being on ``sys.path``.

The output depends on the protoc bundled with the installed ``grpcio-tools`` (it records the
protobuf version in every module), so ``--check`` only passes with the same ``grpcio-tools``
version that produced the committed files.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PB_DIR = Path(__file__).resolve().parent
"""Directory holding the generated (committed) modules."""

REPO_ROOT = PB_DIR.parents[2]
"""Root of the source tree (``tubemq_aio/protocol/pb`` is three levels below it)."""

PROTO_DIR = REPO_ROOT / "protos"
"""Directory holding the ``.proto`` sources."""

GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")
"""File-name endings of the files protoc generates (anything else in ``pb`` is hand-written)."""

_VERSION_RE = re.compile(r"^# Protobuf Python Version: (?P<version>\S+)$", re.MULTILINE)
_IMPORT_RE = re.compile(
    r"^import (?P<module>[A-Za-z_][A-Za-z0-9_]*_pb2)(?P<alias> as [A-Za-z_][A-Za-z0-9_]*)?$",
    re.MULTILINE,
)
_FROM_IMPORT_RE = re.compile(r"^from (?P<module>[A-Za-z_][A-Za-z0-9_]*_pb2) import ", re.MULTILINE)


class GenerationError(RuntimeError):
    """protoc could not be run or failed on the ``.proto`` sources."""


@dataclass
class Staleness:
    """Differences between freshly generated files and the committed ones (file names only)."""

    changed: list[str] = field(default_factory=list)
    """Generated files whose committed content differs."""
    missing: list[str] = field(default_factory=list)
    """Generated files that are not committed at all."""
    unexpected: list[str] = field(default_factory=list)
    """Committed generated-looking files that protoc no longer produces."""

    def __bool__(self) -> bool:
        """True when anything differs."""
        return bool(self.changed or self.missing or self.unexpected)

    def describe(self) -> str:
        """One line per kind of difference, naming the files."""
        lines = []
        if self.changed:
            lines.append("  out of date: " + ", ".join(self.changed))
        if self.missing:
            lines.append("  missing:     " + ", ".join(self.missing))
        if self.unexpected:
            lines.append("  unexpected:  " + ", ".join(self.unexpected))
        return "\n".join(lines)


def proto_sources(proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Return the ``.proto`` files of ``proto_dir``, sorted; raise if there are none."""
    sources = sorted(proto_dir.glob("*.proto"))
    if not sources:
        raise GenerationError(f"no .proto files found in {proto_dir}")
    return sources


def _grpc_tools_include_dir() -> Path | None:
    """Locate the well-known-types include directory shipped with ``grpcio-tools``."""
    spec = importlib.util.find_spec("grpc_tools")
    if spec is None or not spec.submodule_search_locations:
        return None
    include = Path(next(iter(spec.submodule_search_locations))) / "_proto"
    return include if include.is_dir() else None


def run_protoc(sources: Sequence[Path], proto_dir: Path, out_dir: Path) -> None:
    """Run ``grpc_tools.protoc`` on ``sources``; write ``*_pb2.py``/``*_pb2.pyi`` to ``out_dir``."""
    if importlib.util.find_spec("grpc_tools") is None:
        raise GenerationError("grpcio-tools is not installed (pip install -e . --group dev)")
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={proto_dir.resolve()}"]
    include = _grpc_tools_include_dir()
    if include is not None:
        cmd.append(f"--proto_path={include}")
    cmd += [f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
    cmd += [str(source.resolve()) for source in sources]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise GenerationError(f"protoc failed (exit {result.returncode}):\n{detail}")


def rewrite_imports(source: str, local_modules: Collection[str]) -> str:
    """Make imports of our own generated modules package-relative.

    ``import RPC_pb2 as RPC__pb2`` becomes ``from . import RPC_pb2 as RPC__pb2`` and
    ``from RPC_pb2 import X`` becomes ``from .RPC_pb2 import X``, but only for modules named in
    ``local_modules``; imports of ``google.protobuf`` and other packages are left alone.
    """

    def _plain(match: re.Match[str]) -> str:
        if match["module"] not in local_modules:
            return match[0]
        return f"from . import {match['module']}{match['alias'] or ''}"

    def _from(match: re.Match[str]) -> str:
        if match["module"] not in local_modules:
            return match[0]
        return f"from .{match['module']} import "

    return _FROM_IMPORT_RE.sub(_from, _IMPORT_RE.sub(_plain, source))


def generate_into(out_dir: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Generate all modules into the (empty) directory ``out_dir``; return the files written."""
    sources = proto_sources(proto_dir)
    run_protoc(sources, proto_dir, out_dir)
    local_modules = {f"{source.stem}_pb2" for source in sources}
    generated = sorted(p for p in out_dir.iterdir() if p.name.endswith(GENERATED_SUFFIXES))
    if not generated:
        raise GenerationError(f"protoc produced no files in {out_dir}")
    for path in generated:
        text = path.read_text(encoding="utf-8")
        rewritten = rewrite_imports(text, local_modules)
        if rewritten != text:
            path.write_text(rewritten, encoding="utf-8")
    return generated


def _generated_names(directory: Path) -> set[str]:
    """Names of the generated-looking files in ``directory``."""
    return {p.name for p in directory.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}


def compare(fresh_dir: Path, committed_dir: Path) -> Staleness:
    """Compare freshly generated files in ``fresh_dir`` with those in ``committed_dir``."""
    fresh = _generated_names(fresh_dir)
    committed = _generated_names(committed_dir)
    result = Staleness(missing=sorted(fresh - committed), unexpected=sorted(committed - fresh))
    for name in sorted(fresh & committed):
        if (fresh_dir / name).read_bytes() != (committed_dir / name).read_bytes():
            result.changed.append(name)
    return result


def _protobuf_version(path: Path) -> str | None:
    """The ``# Protobuf Python Version:`` recorded in a generated module, if any."""
    if not path.is_file():
        return None
    match = _VERSION_RE.search(path.read_text(encoding="utf-8"))
    return match["version"] if match else None


def _version_hint(fresh_dir: Path, committed_dir: Path, names: Sequence[str]) -> str:
    """Explain a difference caused by another protoc version, or return ""."""
    for name in names:
        if not name.endswith(".py"):
            continue
        fresh = _protobuf_version(fresh_dir / name)
        committed = _protobuf_version(committed_dir / name)
        if fresh and committed and fresh != committed:
            return (
                f"\nThe committed files were generated for protobuf {committed}; the installed "
                f"grpcio-tools generates for {fresh}. Regenerate, or install the grpcio-tools "
                "version that produced the committed files."
            )
    return ""


def _relative(path: Path) -> str:
    """``path`` relative to the repository root when possible, for messages."""
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def check(out_dir: Path = PB_DIR, proto_dir: Path = PROTO_DIR) -> int:
    """Return 0 when the committed modules in ``out_dir`` match a fresh generation, else 1."""
    with tempfile.TemporaryDirectory(prefix="tubemq-pb-") as tmp:
        fresh_dir = Path(tmp)
        generate_into(fresh_dir, proto_dir)
        stale = compare(fresh_dir, out_dir)
        if not stale:
            print(f"{_relative(out_dir)} is up to date with {_relative(proto_dir)}/*.proto")
            return 0
        hint = _version_hint(fresh_dir, out_dir, stale.changed)
    print(
        f"error: generated protobuf modules in {_relative(out_dir)} are stale:\n"
        f"{stale.describe()}\n"
        "Run `make protos` (python -m tubemq_aio.protocol.pb.generate) and commit the result."
        f"{hint}",
        file=sys.stderr,
    )
    return 1


def write(out_dir: Path = PB_DIR, proto_dir: Path = PROTO_DIR) -> int:
    """Regenerate the modules in ``out_dir``, removing generated files no longer produced."""
    with tempfile.TemporaryDirectory(prefix="tubemq-pb-") as tmp:
        fresh_dir = Path(tmp)
        generate_into(fresh_dir, proto_dir)
        stale = compare(fresh_dir, out_dir)
        for name in stale.changed + stale.missing:
            shutil.copyfile(fresh_dir / name, out_dir / name)
        for name in stale.unexpected:
            (out_dir / name).unlink()
    if stale:
        written = ", ".join(stale.changed + stale.missing) or "-"
        removed = ", ".join(stale.unexpected) or "-"
        print(f"updated {_relative(out_dir)}: wrote {written}; removed {removed}")
    else:
        print(f"{_relative(out_dir)} already up to date")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m tubemq_aio.protocol.pb.generate",
        description="Generate the protobuf modules of tubemq_aio from protos/*.proto.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed generated files are stale",
    )
    args = parser.parse_args(argv)
    try:
        return check() if args.check else write()
    except GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
