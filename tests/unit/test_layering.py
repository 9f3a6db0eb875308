"""Architecture rules from the style guide, checked on the source tree's own imports.

The module graph is read from the code: every ``import`` of every ``*.py`` (at module level, in a
function, or under ``TYPE_CHECKING``) and every ``import``/``cimport`` line of every ``*.pyx``.
On that graph: no cycle between modules, no module importing a layer above its own (see
:data:`LAYERS` and docs/architecture.md), and no private module (a name with a leading ``_``)
imported from outside the package that holds it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.support.source_trees import source_tree

PACKAGE = Path(__file__).resolve().parents[2] / "tubemq_aio"
ROOT_NAME = "tubemq_aio"
FORBIDDEN_IN_PROTOCOL = {"asyncio", "socket", "time", "selectors", "ssl", "threading", "anyio"}

#: Layers from the ground up; a module belongs to the layer of its longest matching prefix and
#: imports only from its own layer or those below.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ground",
        (
            "tubemq_aio.errors",
            "tubemq_aio.checks",
            "tubemq_aio.tls",
            "tubemq_aio._version",
            "tubemq_aio.accelerator",
        ),
    ),
    ("protocol", ("tubemq_aio.protocol",)),
    ("compiled twins", ("tubemq_aio._speedups",)),
    (
        "foundation",
        (
            "tubemq_aio.models",
            "tubemq_aio.auth",
            "tubemq_aio._io",
            "tubemq_aio._supervisor",
            "tubemq_aio.supervisor",
            "tubemq_aio.telemetry",
            "tubemq_aio.config",
            "tubemq_aio._url_keys",
            "tubemq_aio.tdmsg",
            "tubemq_aio.admin",
        ),
    ),
    ("clients", ("tubemq_aio",)),
    ("test tools", ("tubemq_aio.testing",)),
    (
        "applications",
        (
            "tubemq_aio.gateway",
            "tubemq_aio.spark",
            "tubemq_aio.cli",
            "tubemq_aio.demo",
            "tubemq_aio.__main__",
        ),
    ),
)
#: The HTTP gateway's wings from the ground up (docs/architecture.md, "The gateway's wings"): a
#: module imports only from its own wing or those below. The ground floor is every module directly
#: in ``tubemq_aio.gateway`` except the assembly's; the assembly (top floor) wires the app.
GATEWAY = "tubemq_aio.gateway"
GATEWAY_WINGS: tuple[str, ...] = (
    "ground",
    "leases",
    "config",
    "tubemq",
    "engine",
    "housekeeper",
    "http",
    "assembly",
)
_ASSEMBLY_MODULES = ("app", "bootstrap", "__main__", "demo", "dev", "server")
GATEWAY_ASSEMBLY = frozenset({GATEWAY, *(f"{GATEWAY}.{name}" for name in _ASSEMBLY_MODULES)})
#: Packages of ours that stand on the SDK: they see only its public modules.
OUTSIDE_THE_SDK = ("tubemq_aio.testing", *LAYERS[-1][1])

_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.MULTILINE)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``*.py`` and ``*.pyx`` of the package."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*")):
        if path.suffix not in (".py", ".pyx"):
            continue
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def raw_imports(name: str, path: Path, modules: Iterable[str] = ()) -> set[str]:
    """Every dotted name ``name`` imports; ``from a import b`` gives ``a.b`` when that is one of
    ``modules``, ``a`` otherwise."""
    source = path.read_text()
    if path.suffix == ".pyx":
        return {m.group(1) or m.group(2) for m in _PYX_IMPORT.finditer(source)}
    known = set(modules)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(source_tree(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                names.add(sub if sub in known else base)
    return names


def module_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a name resolves to its longest known module)."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for imported in raw_imports(name, path, files):
            while imported and imported not in files:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and _within(imported, ROOT_NAME):
                targets.add(imported)
        graph[name] = targets
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        # Iterative Tarjan: the graph is deep enough to make recursion a needless risk.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def layer_of(name: str) -> int:
    """Index in :data:`LAYERS` of the layer whose prefix matches ``name`` longest."""
    best, best_len = -1, -1
    for level, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _within(name, prefix) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
    assert best >= 0, f"{name} is in no layer"
    return best


def private_owner(name: str) -> str | None:
    """The package that holds the private module ``name``, or None if no part of it is private."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def private_import_allowed(importer: str, imported: str) -> bool:
    """Whether ``importer`` may import ``imported`` (only from inside the private part's owner;
    the root package's private modules belong to the SDK, not to the packages on top of it)."""
    owner = private_owner(imported)
    if owner is None:
        return True
    if owner == ROOT_NAME and any(_within(importer, p) for p in OUTSIDE_THE_SDK):
        return False
    return _within(importer, owner)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph(module_files())


def test_the_graph_sees_every_kind_of_import(graph: dict[str, set[str]]) -> None:
    # A .pyx file, a TYPE_CHECKING import, an import inside a function.
    assert "tubemq_aio.protocol.framing" in graph["tubemq_aio._speedups._cdecode"]
    assert "tubemq_aio.models" in graph["tubemq_aio.telemetry"]
    assert "tubemq_aio.testing.cluster" in graph["tubemq_aio.cli"]
    assert "tubemq_aio.consumer.toolkit" in graph["tubemq_aio.gateway.tubemq.tube_group"]


def test_the_graph_resolves_relative_and_package_imports(tmp_path: Path) -> None:
    package = tmp_path / ROOT_NAME
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text("from .. import VALUE\nfrom ..sub import other\n")
    (package / "sub" / "other.py").write_text("import json\n")
    (package / "sub" / "_fast.pyx").write_text(
        "from libc.string cimport memcpy\nimport tubemq_aio.sub.other\n"
    )
    assert module_graph(module_files(package)) == {
        "tubemq_aio": set(),
        "tubemq_aio.sub": {"tubemq_aio.sub.leaf"},
        "tubemq_aio.sub.leaf": {"tubemq_aio", "tubemq_aio.sub.other"},
        "tubemq_aio.sub.other": set(),
        "tubemq_aio.sub._fast": {"tubemq_aio.sub.other"},
    }


def test_no_import_cycle_between_modules(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_no_module_imports_a_higher_layer(graph: dict[str, set[str]]) -> None:
    upward = [
        f"{name} ({LAYERS[layer_of(name)][0]}) -> {dep} ({LAYERS[layer_of(dep)][0]})"
        for name, deps in sorted(graph.items())
        for dep in sorted(deps)
        if layer_of(dep) > layer_of(name)
    ]
    assert upward == []


def test_no_private_module_is_imported_from_another_package(graph: dict[str, set[str]]) -> None:
    leaks = [
        f"{name} -> {dep}"
        for name, deps in sorted(graph.items())
        for dep in sorted(deps)
        if not private_import_allowed(name, dep)
    ]
    assert leaks == []


def test_the_checks_catch_what_they_are_for() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert layer_of("tubemq_aio.protocol.framing") < layer_of("tubemq_aio.producer.producer")
    sessions = "tubemq_aio.gateway.tubemq.tube_group"
    assert layer_of("tubemq_aio.producer.producer") < layer_of(sessions)
    assert not private_import_allowed(sessions, "tubemq_aio.consumer._decode")
    assert not private_import_allowed("tubemq_aio.spark._reader", "tubemq_aio._client")
    assert not private_import_allowed("tubemq_aio.testing.fuzz", "tubemq_aio.protocol._pbparse")
    assert private_import_allowed("tubemq_aio.consumer.toolkit", "tubemq_aio.consumer._decode")
    assert private_import_allowed("tubemq_aio.producer.producer", "tubemq_aio._io.pool")
    assert private_import_allowed("tubemq_aio.spark._reader", "tubemq_aio.spark._columns")


def gateway_wing_of(name: str) -> int:
    """Index in :data:`GATEWAY_WINGS` of the gateway module ``name``."""
    assert _within(name, GATEWAY), name
    if name in GATEWAY_ASSEMBLY:
        return GATEWAY_WINGS.index("assembly")
    wing = name.removeprefix(GATEWAY + ".").split(".")[0]
    if wing in GATEWAY_WINGS and f"{GATEWAY}.{wing}" not in GATEWAY_ASSEMBLY:
        return GATEWAY_WINGS.index(wing)
    return GATEWAY_WINGS.index("ground")


def gateway_upward_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import by a gateway module of a gateway module in a higher wing."""
    return [
        f"{name} ({GATEWAY_WINGS[gateway_wing_of(name)]}) -> "
        f"{dep} ({GATEWAY_WINGS[gateway_wing_of(dep)]})"
        for name, deps in sorted(graph.items())
        if _within(name, GATEWAY)
        for dep in sorted(deps)
        if _within(dep, GATEWAY) and gateway_wing_of(dep) > gateway_wing_of(name)
    ]


def test_every_gateway_wing_exists() -> None:
    for wing in GATEWAY_WINGS[1:-1]:
        assert (PACKAGE / "gateway" / wing / "__init__.py").is_file(), wing


def test_no_gateway_module_imports_a_higher_wing(graph: dict[str, set[str]]) -> None:
    assert gateway_upward_imports(graph) == []


def test_the_wing_check_catches_an_upward_import() -> None:
    bad = {
        f"{GATEWAY}.leases.lease_store": {f"{GATEWAY}.http.schemas", f"{GATEWAY}.errors"},
        f"{GATEWAY}.config.gateway_config": {f"{GATEWAY}.engine.data"},
        f"{GATEWAY}.tubemq.tube_group": {f"{GATEWAY}.config.engine_settings"},
        f"{GATEWAY}.http.deps": {f"{GATEWAY}.engine.port", f"{GATEWAY}.app"},
        f"{GATEWAY}.app": {f"{GATEWAY}.http.deps"},
    }
    assert gateway_upward_imports(bad) == [
        f"{GATEWAY}.config.gateway_config (config) -> {GATEWAY}.engine.data (engine)",
        f"{GATEWAY}.http.deps (http) -> {GATEWAY}.app (assembly)",
        f"{GATEWAY}.leases.lease_store (leases) -> {GATEWAY}.http.schemas (http)",
    ]


def protocol_sources() -> list[Path]:
    return [p for p in (PACKAGE / "protocol").rglob("*.py") if "pb" not in p.parts]


@pytest.mark.parametrize("path", protocol_sources(), ids=lambda p: p.name)
def test_protocol_package_is_pure(path: Path) -> None:
    roots = {name.split(".")[0] for name in raw_imports("tubemq_aio.protocol.x", path)}
    assert not roots & FORBIDDEN_IN_PROTOCOL, f"{path} imports {roots & FORBIDDEN_IN_PROTOCOL}"


def test_the_accelerator_loader_is_pure() -> None:
    path = PACKAGE / "accelerator.py"
    roots = {name.split(".")[0] for name in raw_imports("tubemq_aio.accelerator", path)}
    assert not roots & (FORBIDDEN_IN_PROTOCOL | {ROOT_NAME}), roots


def test_testing_package_depends_only_on_protocol(graph: dict[str, set[str]]) -> None:
    # tubemq_aio.telemetry builds testing.otel's options; it stands on errors and models only.
    # tubemq_aio.admin (the master's web API client) stands on errors only.
    allowed = (
        "tubemq_aio.protocol",
        "tubemq_aio.errors",
        "tubemq_aio.testing",
        "tubemq_aio.telemetry",
        "tubemq_aio.admin",
    )
    for name, deps in graph.items():
        if _within(name, "tubemq_aio.testing"):
            for dep in deps:
                assert any(_within(dep, a) for a in allowed), (name, dep)


def _error_class_names() -> set[str]:
    tree = source_tree(PACKAGE / "errors.py")
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def test_every_error_has_one_home_and_one_import_path() -> None:
    # Each error class is defined in tubemq_aio.errors; besides there, only the package's top
    # level names it (its public API). Nothing else imports it from elsewhere or re-exports it.
    errors = _error_class_names()
    assert {"TubeMQError", "ConfigError", "DataLossError"} <= errors
    stray: list[str] = []
    for name, path in module_files().items():
        if path.suffix != ".py" or name in ("tubemq_aio", "tubemq_aio.errors"):
            continue
        tree = source_tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module not in ("tubemq_aio.errors", None):
                stray += [
                    f"{name} imports {a.name} from {node.module}"
                    for a in node.names
                    if a.name in errors
                ]
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                exported = ast.literal_eval(node.value)
                stray += [f"{name} re-exports {e}" for e in exported if e in errors]
    assert stray == []


def top_level_names(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def gateway_imports_from_elsewhere(files: Mapping[str, Path]) -> list[str]:
    """Every ``from tubemq_aio.gateway.<module> import name`` (in the package) of a name that
    module does not define: a gateway name is imported only from its own module. The package's
    face (``tubemq_aio.gateway``, the public API) is left out."""
    defined = {name: top_level_names(path) for name, path in files.items() if path.suffix == ".py"}
    stray: list[str] = []
    for name, path in sorted(files.items()):
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                continue
            module = node.module
            if not _within(module, GATEWAY) or module == GATEWAY or module not in defined:
                continue
            stray += [
                f"{name} imports {alias.name} from {module}"
                for alias in node.names
                if alias.name not in defined[module] and f"{module}.{alias.name}" not in files
            ]
    return stray


def test_a_gateway_name_is_imported_only_from_its_own_module() -> None:
    assert gateway_imports_from_elsewhere(module_files()) == []


def test_the_home_check_catches_a_re_export(tmp_path: Path) -> None:
    wing = tmp_path / ROOT_NAME / "gateway" / "wing"
    wing.mkdir(parents=True)
    for package in (wing.parent, wing):
        (package / "__init__.py").write_text("")
    (wing / "home.py").write_text("class Thing:\n    pass\n")
    (wing / "middle.py").write_text("from tubemq_aio.gateway.wing.home import Thing\n")
    (wing / "user.py").write_text(
        "from tubemq_aio.gateway.wing.middle import Thing\n"
        "from tubemq_aio.gateway.wing.home import Thing as Same\n"
    )
    files = module_files(tmp_path / ROOT_NAME)
    assert gateway_imports_from_elsewhere(files) == [
        f"{GATEWAY}.wing.user imports Thing from {GATEWAY}.wing.middle"
    ]
