"""Build the optional compiled accelerator in place (needs Cython, setuptools and a C compiler).

``python -m tubemq_aio._speedups.build`` compiles ``_cdecode.pyx`` and the ``.pxi`` parts it
includes next to itself, as an extension of the running interpreter (``make venv`` runs it),
unless the extension built for this interpreter is newer than its sources (``--force`` builds
anyway). A tree without the extension works the same, on the pure-Python code.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def up_to_date() -> bool:
    """Whether this interpreter's extension exists and is newer than ``_cdecode.pyx``, the
    ``.pxi`` parts it includes and this build script."""
    built = HERE / f"_cdecode{sysconfig.get_config_var('EXT_SUFFIX')}"
    sources = (HERE / "_cdecode.pyx", *HERE.glob("*.pxi"), Path(__file__))
    return built.exists() and all(built.stat().st_mtime >= s.stat().st_mtime for s in sources)


def main() -> int:
    """Compile the extension (unless :func:`up_to_date`); return the process exit code."""
    if "--force" not in sys.argv[1:] and up_to_date():
        return 0
    # Imported by name: both are build-time tools without type information.
    cythonize: Any = importlib.import_module("Cython.Build").cythonize
    setuptools: Any = importlib.import_module("setuptools")
    ext = setuptools.Extension(
        "tubemq_aio._speedups._cdecode",
        [str((HERE / "_cdecode.pyx").relative_to(ROOT))],
        extra_compile_args=["-O2"],
    )
    old = Path.cwd()
    os.chdir(ROOT)  # the extension's source path is relative to the package root
    try:
        with tempfile.TemporaryDirectory(prefix="tubemq-aio-build-") as temp:
            modules = cythonize([ext], language_level=3, quiet=True)
            lib = Path(temp) / "lib"
            args = ["build_ext", "--build-temp", str(Path(temp) / "obj"), "--build-lib", str(lib)]
            dist = setuptools.Distribution({"ext_modules": modules, "script_args": args})
            dist.parse_command_line()
            dist.run_commands()
            # Moved into place, not written over: a running process keeps its loaded copy.
            for built in (lib / "tubemq_aio" / "_speedups").glob("_cdecode.*"):
                os.replace(built, HERE / built.name)
    finally:
        os.chdir(old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
