"""The package metadata a maintainer signs: license files, version, extras, sdist contents."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tubemq_aio

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_and_notice_exist_and_ship() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text
    assert "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert "tubemq-aio" in (ROOT / "NOTICE").read_text()
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE", "NOTICE"]


def test_the_version_is_honest_about_unreleased_changes() -> None:
    """With changes under "Unreleased" the version is a ``.dev0`` of a later release than the
    newest one; with none it is the newest release."""
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[0] == "Unreleased"
    newest = headings[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+ \(\d{4}-\d{2}-\d{2}\)", newest), newest
    released = tuple(int(p) for p in newest.split()[0].split("."))
    unreleased = text[text.index("## Unreleased") : text.index(f"## {newest}")]
    if re.search(r"^- ", unreleased, flags=re.MULTILINE):
        found = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)\.dev0", tubemq_aio.__version__)
        assert found, tubemq_aio.__version__
        assert tuple(int(p) for p in found.groups()) > released
        assert found.group(0) in text[: text.index("## Unreleased")]  # said in the preamble
    else:
        assert tubemq_aio.__version__ == newest.split()[0]


def test_dev_tools_are_a_dependency_group_not_an_extra() -> None:
    config = _pyproject()
    extras = config["project"]["optional-dependencies"]
    assert "dev" not in extras
    groups = config["dependency-groups"]
    dev = [
        req
        for item in groups["dev"]
        for req in (groups[item["include-group"]] if isinstance(item, dict) else [item])
    ]
    assert any(req.startswith("pytest") for req in dev)
    assert any(req.startswith("mypy") for req in dev)
    # Every user extra is also in the dev group, so `make test` exercises each of them.
    packages = {re.split(r"[<>=\[]", req)[0] for req in dev}
    for name, requirements in extras.items():
        for req in requirements:
            assert re.split(r"[<>=\[]", req)[0] in packages, (name, req)


def test_sdist_leaves_benchmark_results_out() -> None:
    sdist = _pyproject()["tool"]["hatch"]["build"]["targets"]["sdist"]
    assert "benchmarks/results" in sdist["exclude"]


def test_project_urls_are_labelled_as_inlongs() -> None:
    urls = _pyproject()["project"]["urls"]
    for label, url in urls.items():
        if "inlong" in url:
            assert "InLong" in label, (label, url)


def test_docs_have_a_dependency_group_of_their_own() -> None:
    """``make docs`` installs the ``docs`` group, not the whole development environment."""
    groups = _pyproject()["dependency-groups"]
    names = {re.split(r"[<>=\[]", req)[0] for req in groups["docs"]}
    assert names == {"mkdocs-material", "mkdocstrings"}
    assert {"include-group": "docs"} in groups["dev"]
    makefile = (ROOT / "Makefile").read_text()
    assert "--group docs" in makefile


def test_anyio_comes_with_the_spark_extras_only() -> None:
    project = _pyproject()["project"]
    assert not any(req.startswith("anyio") for req in project["dependencies"])
    for extra in ("spark", "spark-connect"):
        assert any(req.startswith("anyio") for req in project["optional-dependencies"][extra])
