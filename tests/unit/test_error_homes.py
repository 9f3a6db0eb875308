"""Each error class has one home and one import path: the module that defines it (the package
root of ``tubemq_aio``, ``tubemq_aio.testing`` or ``tubemq_aio.gateway`` may list it again as
a public name). No other module re-exports an error class, and nothing imports one from a
module that is neither its home nor such a root. Read from the source, like test_layering."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.source_trees import source_tree

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tubemq_aio"
#: Packages whose ``__init__`` lists public names, errors included, for their users.
PACKAGE_ROOTS = frozenset({"tubemq_aio", "tubemq_aio.testing", "tubemq_aio.gateway"})
SOURCE_DIRS = ("tubemq_aio", "tests", "benchmarks", "examples")


def module_name(path: Path) -> str:
    """The dotted name of a file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def error_homes() -> dict[str, str]:
    """Class name -> defining module, for every class of the package named ``*Error``."""
    homes: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in source_tree(path).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                assert node.name not in homes, f"{node.name} is defined twice"
                homes[node.name] = module_name(path)
    return homes


def exported_names(tree: ast.Module) -> set[str]:
    """The literal ``__all__`` of a module (empty when it has none)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def import_froms(tree: ast.Module) -> Iterator[ast.ImportFrom]:
    """Every ``from … import …`` of a module, nested ones included (an import is a statement:
    only statement lists are visited, not the expressions, most of a tree's nodes)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()):
                if isinstance(child, ast.ImportFrom):
                    yield child
                elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                    stack.append(child)


def test_errors_are_found() -> None:
    homes = error_homes()
    assert homes["TubeMQError"] == "tubemq_aio.errors"
    assert homes["SparkClusterError"] == "tubemq_aio.testing._errors"
    assert len(homes) > 50


def test_no_module_re_exports_an_error_it_does_not_define() -> None:
    homes = error_homes()
    leaks = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name in PACKAGE_ROOTS:
            continue
        for error in sorted(exported_names(source_tree(path)) & homes.keys()):
            if homes[error] != name:
                leaks.append(f"{name} lists {error} (home: {homes[error]})")
    assert leaks == []


def test_errors_are_imported_from_their_home_or_a_package_root() -> None:
    homes = error_homes()
    detours = []
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in import_froms(source_tree(path)):
                if not node.module or not node.module.startswith("tubemq_aio"):
                    continue
                if node.module in PACKAGE_ROOTS:
                    continue
                for alias in node.names:
                    home = homes.get(alias.name)
                    if home is not None and home != node.module:
                        detours.append(f"{module_name(path)}: {alias.name} from {node.module}")
    assert detours == []
