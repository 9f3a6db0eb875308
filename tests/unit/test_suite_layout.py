"""The test suite keeps the layout docs/testing.md describes: a package tree, helpers imported
from ``tests.support`` by their full name, fixtures found through ``conftest.py`` files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.source_trees import source_tree

TESTS = Path(__file__).resolve().parents[1]
#: Programs the integration tests start as processes; they import each other as top-level
#: modules, so their folder is deliberately not a package.
SCRIPTS = TESTS / "integration" / "scripts"
#: Support modules that start an outside program (headless Chromium, Node.js, the gateway's
#: command): a test module outside ``tests/integration`` that imports one is marked ``system``,
#: which ``make unit`` leaves out (docs/testing.md).
PROGRAM_DRIVERS = (
    "tests.support.headless_chromium",
    "tests.support.node_scripts",
    "tests.support.gateway_dev",
)
#: An import that is only there to register a fixture with pytest.
FIXTURE_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\b.*#\s*noqa:\s*F401", re.MULTILINE)


def _modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if SCRIPTS not in p.parents)


def _imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(source_tree(path)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in _modules()}
    missing = sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []
    assert not list(SCRIPTS.glob("__init__.py"))
    assert not list(SCRIPTS.glob("test_*.py"))


def test_helpers_are_imported_by_their_full_name() -> None:
    local_names = {p.stem for p in _modules()} - {"__init__"}
    wrong = [
        f"{path.relative_to(TESTS)}: {name}"
        for path in _modules()
        for name in _imported_modules(path)
        if name.split(".")[0] in local_names
    ]
    assert wrong == []


def test_no_module_imports_a_test_module_or_a_fixture() -> None:
    test_imports = [
        f"{path.relative_to(TESTS)}: {name}"
        for path in _modules()
        for name in _imported_modules(path)
        if name.rsplit(".", 1)[-1].startswith("test_") or name.endswith(".conftest")
    ]
    assert test_imports == []
    fixture_imports = [
        str(path.relative_to(TESTS))
        for path in _modules()
        if FIXTURE_IMPORT.search(path.read_text())
    ]
    assert fixture_imports == []


def test_tests_that_start_outside_programs_are_system_tests() -> None:
    drivers = [
        path
        for path in _modules()
        if path.name.startswith("test_")
        and TESTS / "integration" not in path.parents
        and any(name.startswith(PROGRAM_DRIVERS) for name in _imported_modules(path))
    ]
    assert len(drivers) >= 3, "the drivers' users were not found"
    unmarked = [
        str(p.relative_to(TESTS)) for p in drivers if "pytest.mark.system" not in p.read_text()
    ]
    assert unmarked == []


def _fixed_example_counts(tree: ast.AST) -> list[int]:
    """Lines of ``max_examples=`` arguments in ``tree`` whose value calls no ``examples(...)``."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg != "max_examples":
                continue
            calls = [n for n in ast.walk(keyword.value) if isinstance(n, ast.Call)]
            if not any(isinstance(c.func, ast.Name) and c.func.id == "examples" for c in calls):
                lines.append(keyword.value.lineno)
    return lines


def test_property_tests_scale_their_example_counts() -> None:
    """Every ``max_examples`` goes through ``tests.support.examples.examples``, so that
    ``make unit`` runs its share of them and ``make test`` all (a fixed count made one module
    cost ``make unit`` about 20 CPU-seconds)."""
    found = {
        str(path.relative_to(TESTS)): lines
        for path in _modules()
        if (lines := _fixed_example_counts(source_tree(path)))
    }
    assert found == {}
    assert _fixed_example_counts(ast.parse("settings(max_examples=300)")) == [1]
    assert _fixed_example_counts(ast.parse("settings(max_examples=int(x) or examples(4))")) == []
