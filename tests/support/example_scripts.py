"""The example scripts of ``examples/`` loaded as modules, for the tests that run their code."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.support.cli_run import SOURCE_ROOT

EXAMPLES = SOURCE_ROOT / "examples"


def load_example(name: str) -> ModuleType:
    """``examples/<name>.py`` imported afresh as module ``name`` (its top level runs)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
