"""Architecture rules from the style guide, checked on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tubemq_aio"
FORBIDDEN_IN_PROTOCOL = {"asyncio", "socket", "time", "selectors", "ssl", "threading", "anyio"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def protocol_sources() -> list[Path]:
    return [p for p in (PACKAGE / "protocol").rglob("*.py") if "_pb" not in p.parts]


@pytest.mark.parametrize("path", protocol_sources(), ids=lambda p: p.name)
def test_protocol_package_is_pure(path: Path) -> None:
    roots = {name.split(".")[0] for name in imported_modules(path)}
    assert not roots & FORBIDDEN_IN_PROTOCOL, f"{path} imports {roots & FORBIDDEN_IN_PROTOCOL}"


def test_protocol_imports_nothing_above_it() -> None:
    # tubemq_aio._speedups is a leaf (checked below): it selects the compiled codec twins.
    allowed = {"tubemq_aio.protocol", "tubemq_aio.errors", "tubemq_aio._speedups"}
    for path in protocol_sources():
        for name in imported_modules(path):
            if name.startswith("tubemq_aio"):
                assert any(name == a or name.startswith(a + ".") for a in allowed), (path, name)


def test_speedups_package_is_a_leaf() -> None:
    for path in (PACKAGE / "_speedups").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith("tubemq_aio") or name.startswith("tubemq_aio._speedups"), (
                path,
                name,
            )
        roots = {name.split(".")[0] for name in imported_modules(path)}
        assert not roots & FORBIDDEN_IN_PROTOCOL, f"{path} imports {roots & FORBIDDEN_IN_PROTOCOL}"


def test_testing_package_depends_only_on_protocol() -> None:
    testing = PACKAGE / "testing"
    # tubemq_aio.telemetry is a leaf (it imports only errors): testing.otel builds its options.
    allowed = {"tubemq_aio.protocol", "tubemq_aio.errors", "tubemq_aio.testing",
               "tubemq_aio.telemetry"}  # fmt: skip
    for path in testing.rglob("*.py"):
        for name in imported_modules(path):
            if name.startswith("tubemq_aio"):
                assert any(name == a or name.startswith(a + ".") for a in allowed), (path, name)
