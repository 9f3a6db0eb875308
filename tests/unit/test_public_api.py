"""The package's public names are exactly the ones docs/api.md documents."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import tubemq_aio
import tubemq_aio.errors

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


# Subpackages with a surface of their own: the test tools, and the HTTP gateway application
# (its errors become HTTP answers, not exceptions in a user's code); the protobuf generator
# runs at build time only.
_OWN_SURFACE = ("tubemq_aio.testing", "tubemq_aio.gateway", "tubemq_aio.protocol.pb")


def package_exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(tubemq_aio.__path__, "tubemq_aio."):
        if info.name.startswith(_OWN_SURFACE):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("tubemq_aio.")
                and not value.__module__.startswith(_OWN_SURFACE)
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_lives_in_errors_and_is_exported() -> None:
    classes = package_exception_classes()
    assert len(classes) >= 40  # the walk really found the package's exceptions
    for where, cls in classes.items():
        assert cls.__module__ == "tubemq_aio.errors", f"{where} must be defined in errors.py"
        assert getattr(tubemq_aio.errors, cls.__name__) is cls
        assert cls.__name__ in tubemq_aio.errors.__all__, f"{cls.__name__} not in errors.__all__"
        assert getattr(tubemq_aio, cls.__name__, None) is cls, f"{cls.__name__} not exported"
        assert cls.__name__ in tubemq_aio.__all__
        assert issubclass(cls, tubemq_aio.TubeMQError)


def test_every_error_is_documented_with_when_and_remedy() -> None:
    text = API_DOC.read_text()
    errors_section = text[text.index("## Errors") :]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", errors_section, flags=re.MULTILINE)
    documented = {name for name, when, remedy in rows if when.strip() and remedy.strip()}
    exported_errors = {
        name
        for name in tubemq_aio.__all__
        if isinstance(getattr(tubemq_aio, name), type)
        and issubclass(getattr(tubemq_aio, name), BaseException)
    }
    assert documented == exported_errors
