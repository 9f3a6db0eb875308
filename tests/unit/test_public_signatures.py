"""No public signature names a private type (issue 32).

A public callable (a function a public module exports, or a method, property or constructor of a
class it exports) whose annotations name an underscore type shows users a name they cannot
import and the API reference a type it does not render. Walks ``__all__`` of every module of the
public surface (``tests/support/public_modules.py``, what ``docs/api.md`` names and the API
reference renders).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator

import pytest

from tests.support.public_modules import PUBLIC_MODULES

#: A name starting with an underscore, alone or as a dotted part (``x._internal.T``), but not a
#: dunder (``__future__``-style names are not types of ours).
PRIVATE_NAME = re.compile(r"(?<![\w])_(?!_)\w*")


def _annotation_texts(func: Callable[..., object]) -> Iterator[tuple[str, str]]:
    """``(parameter or "return", annotation as written)`` of ``func``."""
    for name, annotation in inspect.get_annotations(func).items():
        text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        yield name, text


def _members(cls: type) -> Iterator[tuple[str, Callable[..., object]]]:
    """The callables of ``cls`` a user calls: those the package defines on it or its
    ``tubemq_aio`` bases, public names and dunders (``__init__``, ``__aenter__``...)."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("tubemq_aio"):
            continue
        for name, value in vars(klass).items():
            private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            if private or name in seen:
                continue
            seen.add(name)
            if isinstance(value, staticmethod | classmethod):
                yield name, value.__func__
            elif isinstance(value, property):
                for accessor in (value.fget, value.fset):
                    if accessor is not None:
                        yield name, accessor
            elif inspect.isfunction(value):
                yield name, value


def public_callables() -> Iterator[tuple[str, Callable[..., object]]]:
    """``(qualified name, callable)`` of every public callable of the public modules."""
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                for member, func in _members(value):
                    yield f"{module_name}.{name}.{member}", func
            elif inspect.isfunction(value):
                yield f"{module_name}.{name}", value


def private_names_in_signatures() -> list[str]:
    """Every ``callable(parameter: annotation)`` whose annotation names an underscore type."""
    found = []
    for where, func in public_callables():
        for parameter, text in _annotation_texts(func):
            names = PRIVATE_NAME.findall(text)
            if names:
                found.append(f"{where}({parameter}: {text}) names {names}")
    return sorted(set(found))


def test_the_walk_covers_the_public_api() -> None:
    names = {where for where, _ in public_callables()}
    # a function, a constructor, a method of a private base, a property, a module's function
    for expected in (
        "tubemq_aio.Consumer.__init__",
        "tubemq_aio.Consumer.getmany",
        "tubemq_aio.MessageBatch.__init__",
        "tubemq_aio.MessageBatch.messages",
        "tubemq_aio.telemetry.TracedConsumer.config",
        "tubemq_aio.telemetry.process_span",
    ):
        assert expected in names
    assert len(names) > 300


@pytest.mark.parametrize(
    ("text", "private"),
    [
        ("_GroupConfig", ["_GroupConfig"]),
        ("_BatchGroup | None", ["_BatchGroup"]),
        ("dict[str, _Row]", ["_Row"]),
        ("opentelemetry.metrics._internal.Meter", ["_internal"]),
        ("Mapping[str, str] | None", []),
        ("Callable[..., Awaitable[None]]", []),
        ("Literal['__all__']", []),
        ("ServerError_x", []),
    ],
)
def test_the_private_name_pattern(text: str, private: list[str]) -> None:
    assert PRIVATE_NAME.findall(text) == private


def test_no_public_callable_names_a_private_type() -> None:
    found = private_names_in_signatures()
    assert not found, "public signatures naming private types:\n" + "\n".join(found)
