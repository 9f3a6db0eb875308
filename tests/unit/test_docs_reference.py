"""The API reference is complete: the site, built as ``make docs`` builds it, has an entry for
every public name and every public method of every public class.

"Public" is what the modules the reference covers export in ``__all__``; methods count wherever
in the class's ``tubemq_aio`` bases they are defined (``Consumer.getmany`` lives in a private
base class and must still be rendered on ``Consumer``).
"""

from __future__ import annotations

import html
import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.public_modules import PUBLIC_MODULES

#: Builds the site with mkdocs in a process: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]

#: The modules whose ``__all__`` the reference pages render.
REFERENCED_MODULES = PUBLIC_MODULES
#: Seconds the site build may take (a few CPU-seconds; the machine may be busy).
BUILD_TIMEOUT = 600


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it."""
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return site


@pytest.fixture(scope="module")
def reference_ids(site: Path) -> set[str]:
    """Every ``tubemq_aio.…`` anchor of the built reference pages."""
    ids: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        ids.update(re.findall(r'id="(tubemq_aio\.[\w.]+)"', page.read_text(encoding="utf-8")))
    assert len(ids) > 100, "the reference pages rendered (almost) nothing"
    return ids


def _suffixes(ids: set[str]) -> set[str]:
    """``a.b.C.m`` -> ``C.m``, ``b.C.m``, ``m``...: names as rendered under any module path."""
    found: set[str] = set()
    for anchor in ids:
        parts = anchor.split(".")
        found.update(".".join(parts[i:]) for i in range(1, len(parts)))
    return found


def public_methods(cls: type) -> Iterator[str]:
    """Public functions, class/static methods and properties of ``cls`` defined by the package
    (itself or a ``tubemq_aio`` base class; what ``object`` or ``Exception`` give is not ours)."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("tubemq_aio"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(value, staticmethod | classmethod | property) or inspect.isfunction(
                value
            ):
                seen.add(name)
                yield name


def public_names() -> Iterator[tuple[str, str, object]]:
    """``(module, name, value)`` of every name the referenced modules export."""
    for module_name in REFERENCED_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if not name.startswith("__"):
                yield module_name, name, getattr(module, name)


def test_every_exported_name_is_in_the_reference(reference_ids: set[str]) -> None:
    rendered = _suffixes(reference_ids)
    missing = [f"{module}.{name}" for module, name, _ in public_names() if name not in rendered]
    assert not missing, f"not in the API reference: {missing}"


def test_every_public_method_of_a_public_class_is_in_the_reference(
    reference_ids: set[str],
) -> None:
    rendered = _suffixes(reference_ids)
    missing = [
        f"{module}.{name}.{method}"
        for module, name, value in public_names()
        if inspect.isclass(value)
        for method in public_methods(value)
        if f"{name}.{method}" not in rendered
    ]
    assert not missing, f"not in the API reference: {missing}"


def test_the_methods_the_issue_named_are_rendered(reference_ids: set[str]) -> None:
    # Inherited from the private base classes: the reason for ``inherited_members``.
    for method in ("getmany", "commit", "positions", "assignment", "messages", "start", "close"):
        assert f"tubemq_aio.Consumer.{method}" in reference_ids
        assert f"tubemq_aio.ClientBalancedConsumer.{method}" in reference_ids
    assert {"tubemq_aio.Producer.start", "tubemq_aio.Producer.close"} <= reference_ids


def _page_text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_no_page_shows_a_base_class_but_the_errors_page(site: Path) -> None:
    """A public class's base is often internal (``ConsumerBase``, ``SendAttempts``): bases are
    shown only where the hierarchy is the point, the errors page."""
    shown = {
        page.parent.name
        for page in (site / "reference").rglob("*.html")
        if "Bases:" in _page_text(page)
    }
    assert shown == {"errors"}
    text = _page_text(site / "reference" / "consumer" / "index.html")
    assert "ConsumerBase" not in text


def _found(site: Path, pattern: re.Pattern[str]) -> list[str]:
    """``page: match`` of every match of ``pattern`` in the reference pages' text."""
    return [
        f"{page.parent.name}: {m.group(0)}"
        for page in (site / "reference").rglob("*.html")
        for m in pattern.finditer(_page_text(page))
    ]


def test_defaults_are_rendered_as_values(site: Path) -> None:
    """``timeout=DEFAULT_TIMEOUT`` is shown as ``timeout=10.0``: no signature default names an
    upper-case constant."""
    named = re.compile(r"(\w+: [^=\n]+ = )([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
    assert _found(site, named) == []
    admin = _page_text(site / "reference" / "admin" / "index.html")
    assert "timeout: float = 10.0" in admin


def test_no_default_is_a_private_name_or_an_enum_value(site: Path) -> None:
    """A default is what a caller could write: not a private sentinel (``avoid = _NOTHING``),
    not a dataclass factory (``(lambda: _NO_ATTRIBUTES)()``, ``_empty_attributes()``), not an
    enum member's bare value (``format: TDFormat = 1``, which is no ``TDFormat``)."""
    private = re.compile(r"\w+: [^=\n]+ = [^\n]*(?<![\w.])_[A-Za-z]\w*[^\n]*|= \(\s*lambda")
    assert _found(site, private) == []
    models = _page_text(site / "reference" / "models" / "index.html")
    assert "attributes: Mapping[str, str] = MappingProxyType({})" in models
    # Nor does a docstring send the reader to a private module.
    for page in ("models", "consumer"):
        text = _page_text(site / "reference" / page / "index.html")
        assert "_url_keys" not in text
        assert "_cb_assigner" not in text
    producer = _page_text(site / "reference" / "producer" / "index.html")
    assert "avoid: Set[str] = frozenset()" in producer
    tdmsg = _page_text(site / "reference" / "tdmsg" / "index.html")
    assert "format: TDFormat = TDFormat.V1" in tdmsg
    assert "attributes: Mapping[str, str] = MappingProxyType({})" in tdmsg


def test_the_gateway_spark_and_stats_pages_exist(reference_ids: set[str]) -> None:
    for name in (
        "GatewayConfig",
        "create_app",
        "TubeMQDataSource",
        "ConsumerStats",
        "local_session",
    ):
        assert any(i.endswith(f".{name}") for i in reference_ids), name
