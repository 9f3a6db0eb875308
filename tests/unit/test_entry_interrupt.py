"""A Ctrl-C while ``tubemq-aio`` or ``tubemq-gateway`` is still importing ends as a later one:
status 130 and one short line on stderr, no traceback.

The commands run as their console wrappers do (``from <entry module> import <function>``, then
``sys.exit(function())``), from a program that first puts an import hook in place: when the
command's import reaches a module of the heavy part, the hook prints ``importing`` and waits
for a signal, and the test sends SIGINT only then, so the interrupt lands inside the import
every time.
"""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import tomllib
from typing import Any

import pytest

from tests.support.cli_run import CALL_TIMEOUT, SOURCE_ROOT, cli_env
from tubemq_aio.cli._common import EXIT_INTERRUPTED

#: The module the console commands start from, outside the package.
ENTRY = "_tubemq_aio_entry"
#: The program: the hook, then the console wrapper's two lines. ``{module}`` is the module whose
#: import blocks, ``{entry}`` the ``module:function`` of the command.
PROGRAM = """
import importlib, signal, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            print("importing", flush=True)
            signal.pause()  # the SIGINT handler raises KeyboardInterrupt here
        return None

sys.meta_path.insert(0, Block())
module, function = {entry!r}.split(":")
sys.exit(getattr(importlib.import_module(module), function)())
"""


def _pyproject() -> dict[str, Any]:
    with (SOURCE_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _scripts() -> dict[str, str]:
    scripts: dict[str, str] = _pyproject()["project"]["scripts"]
    return scripts


def test_the_commands_start_from_a_light_module_the_wheel_ships() -> None:
    """Both commands' entry module is outside the package, ships in the wheel, and imports
    nothing of ``tubemq_aio`` at its top level (the package's import is what a Ctrl-C hits)."""
    assert {name: entry.split(":")[0] for name, entry in _scripts().items()} == {
        "tubemq-aio": ENTRY,
        "tubemq-gateway": ENTRY,
    }
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert f"{ENTRY}.py" in wheel["only-include"]
    tree = ast.parse((SOURCE_ROOT / f"{ENTRY}.py").read_text())
    top: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            top += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            top.append(node.module or "")
    assert top == ["__future__", "sys"]


@pytest.mark.system
@pytest.mark.parametrize(
    ("command", "blocked", "line"),
    [
        # while the package itself imports (the client), before the CLI's own modules
        ("tubemq-aio", "tubemq_aio.consumer", b"tubemq-aio: error: interrupted\n"),
        # while the CLI's modules import
        ("tubemq-aio", "tubemq_aio.cli._produce", b"tubemq-aio: error: interrupted\n"),
        # while the gateway's app and FastAPI import
        ("tubemq-gateway", "tubemq_aio.gateway.app", b"tubemq-gateway: interrupted\n"),
    ],
)
def test_ctrl_c_during_the_imports_is_quiet(command: str, blocked: str, line: bytes) -> None:
    program = PROGRAM.format(module=blocked, entry=_scripts()[command])
    proc = subprocess.Popen(
        [sys.executable, "-c", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        bufsize=0,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"importing\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=CALL_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (EXIT_INTERRUPTED, b"", line)
