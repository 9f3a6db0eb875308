"""Values that travel together are one value object (the project's style rules):
no function of the package takes eight or more parameters but the few listed here.

A parameter is any name a caller may pass (``self``/``cls`` aside, keyword-only, ``*args`` and
``**kwargs`` counted). The public keyword constructors are accepted as such: each parameter is
one documented setting of the object, which a caller names one by one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source_trees import source_tree

PACKAGE = Path(__file__).resolve().parents[2] / "tubemq_aio"
#: The most parameters a function takes unless listed below.
MOST = 7
#: ``path:function`` -> why it may take more.
ACCEPTED = {
    "consumer/consumer.py:__init__": "Consumer, the public keyword constructor",
    "consumer/client_balanced.py:__init__": "ClientBalancedConsumer, the keyword constructor",
    "testing/_cluster.py:__init__": "LocalCluster, the public keyword constructor",
    "testing/_fake_cluster.py:__init__": "FakeCluster, the public keyword constructor",
    "testing/redis_sentinel.py:__init__": "RedisSentinelSet, the public keyword constructor",
}


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a caller may pass to ``node``: ``self``/``cls`` aside, the keyword-only
    ones, ``*args`` and ``**kwargs`` included."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def long_parameter_lists() -> dict[str, int]:
    """``path:function`` -> parameter count, for every function of the package over :data:`MOST`."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(source_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = parameter_count(node)
                if count > MOST:
                    found[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = count
    return found


def test_no_function_takes_eight_parameters_unless_accepted() -> None:
    extra = {name: n for name, n in long_parameter_lists().items() if name not in ACCEPTED}
    assert not extra, f"carry the parameters that travel together as one value object: {extra}"


def test_the_count_sees_keyword_only_parameters_and_skips_self() -> None:
    tree = ast.parse(
        "class C:\n"
        "    def m(self, a, b, c, *, d, e, f, g): ...\n"
        "    def n(self, a, b, c, d, e, f, g, h): ...\n"
        "def k(a, /, b, *args, c, **kwargs): ...\n"
    )
    functions = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), key=lambda n: n.lineno
    )
    assert [parameter_count(f) for f in functions] == [7, 8, 5]
