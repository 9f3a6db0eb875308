"""griffe extension: render a default that names a constant (``timeout=DEFAULT_TIMEOUT``) as the
constant's value (``timeout=10.0``), so the API reference shows what the default is.

Replaced: a name whose target is a module-level constant with a literal value (number, string,
bytes, tuple, ...); a private module-level name (``_NOTHING``) by the expression it is bound to
(``frozenset()``) when that names nothing private itself; and a dataclass's
``default_factory=lambda: NAME`` (rendered ``(lambda: NAME)()``) by NAME's value, by the same
rules. An enum member (``TDFormat.V1``) stays as written: its value (``1``) is not what a caller
passes. Anything else (a sentinel object, another call) stays as written.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

#: A private name (``_x``) in a rendered expression: it means nothing to a reader.
_PRIVATE = re.compile(r"(?<![\w.])_[A-Za-z]\w*")


def _literal(obj: griffe.Object | griffe.Alias) -> str | None:
    try:
        target = obj.final_target if isinstance(obj, griffe.Alias) else obj
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    if not isinstance(target, griffe.Attribute) or target.value is None:
        return None
    if not isinstance(target.parent, griffe.Module):  # an enum member, a class attribute
        return None
    text = str(target.value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        number = _arithmetic(text)
        if number is not None:
            return repr(number)
        # A private module constant (``_NOTHING = frozenset()``): the expression it is bound to.
        private = target.name.startswith("_") and not _PRIVATE.search(text)
        return text if private else None
    return text


def _arithmetic(text: str) -> int | float | None:
    """The value of ``64 * 1024 * 1024``-like text (numbers and + - * / // ** only), or None."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    if not all(isinstance(node, allowed) for node in ast.walk(tree)):
        return None
    if not all(
        isinstance(n.value, int | float) for n in ast.walk(tree) if isinstance(n, ast.Constant)
    ):
        return None
    value = eval(compile(tree, "<default>", "eval"), {"__builtins__": {}})  # numbers only
    return value if isinstance(value, int | float) else None


class NamedDefaults(griffe.Extension):
    """Replace constant-name defaults by their values once the package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Walk every function and attribute of the loaded package."""
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        for member in obj.members.values():
            if isinstance(member, griffe.Alias):
                continue
            if isinstance(member, griffe.Function):
                for param in member.parameters:
                    param.default = self._value(member, param.default)
            elif isinstance(member, griffe.Attribute) and isinstance(member.parent, griffe.Class):
                member.value = self._value(member, member.value)
            if isinstance(member, griffe.Module | griffe.Class):
                self._walk(member, seen)

    def _value(self, owner: griffe.Object, default: Any) -> Any:
        if (
            isinstance(default, griffe.ExprCall)
            and isinstance(default.function, griffe.ExprLambda)
            and not default.function.parameters
            and not default.arguments
        ):  # ``field(default_factory=lambda: NAME)``, rendered ``(lambda: NAME)()``
            body = self._value(owner, default.function.body)
            return default if body is default.function.body else body
        if not isinstance(default, griffe.ExprName | griffe.ExprAttribute):
            return default
        try:
            found = owner.modules_collection.get_member(default.canonical_path)
        except (KeyError, ValueError):
            return default
        return _literal(found) or default
