"""The package's public names are exactly the ones docs/api.md documents."""

from __future__ import annotations

import re
from pathlib import Path

import tubemq_aio

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_names() -> set[str]:
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", API_DOC.read_text(), flags=re.MULTILINE))


def test_all_matches_the_documented_api() -> None:
    assert set(tubemq_aio.__all__) == documented_names()


def test_every_public_name_exists_and_has_a_docstring() -> None:
    for name in tubemq_aio.__all__:
        value = getattr(tubemq_aio, name)
        if name != "__version__":
            assert value.__doc__, f"{name} has no docstring"


def test_package_ships_type_information() -> None:
    assert (Path(tubemq_aio.__file__).parent / "py.typed").exists()
