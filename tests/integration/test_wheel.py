"""The built wheel, installed into a clean virtual environment, works on its own.

Nothing from the source tree is importable there: the venv has no site packages of ours, the
commands run from a temporary directory without ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import tubemq_aio
from tests.support.cli_run import SOURCE_ROOT
from tubemq_aio.testing import LocalCluster

#: Seconds for building the wheel and for installing it with its dependencies.
BUILD_TIMEOUT = 180.0
#: Prints where the package was imported from, its version and the installed metadata version.
PROBE = (
    "import importlib.metadata as m, tubemq_aio; print(tubemq_aio.__file__);"
    "print(tubemq_aio.__version__, m.version('tubemq-aio'))"
)
#: The consume path imports and runs on the pure-Python code: no compiled accelerator there.
PURE_PROBE = (
    "from tubemq_aio import accelerator, Consumer; from tubemq_aio.protocol import framing;"
    "print(accelerator.compiled(), type(framing.new_frame_decoder()).__module__)"
)


def _run(argv: list[str], cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        argv, input=stdin, capture_output=True, cwd=cwd, env=env, timeout=BUILD_TIMEOUT
    )


def test_wheel_installs_and_works_in_a_clean_venv(
    cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    """Build the sdist and the wheel from it (as ``make dist``), check their contents, install
    the wheel alone, import it, run the CLI."""
    built = _run(
        [
            sys.executable,
            *shlex.split("-m build --no-isolation --outdir"),
            str(tmp_path / "dist"),
            str(SOURCE_ROOT),
        ],
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr.decode()[-2000:]
    (sdist,) = (tmp_path / "dist").glob("tubemq_aio-*.tar.gz")
    top = f"tubemq_aio-{tubemq_aio.__version__}/"
    with tarfile.open(sdist) as archive:
        in_sdist = set(archive.getnames())
    assert {top + "LICENSE", top + "NOTICE", top + "pyproject.toml"} <= in_sdist
    assert not [n for n in in_sdist if n.startswith(top + "benchmarks/results")]
    (wheel,) = (tmp_path / "dist").glob("tubemq_aio-*.whl")
    assert wheel.name.startswith(f"tubemq_aio-{tubemq_aio.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"tubemq_aio-{tubemq_aio.__version__}.dist-info/"
    assert {info + "licenses/LICENSE", info + "licenses/NOTICE"} <= names
    metadata = zipfile.ZipFile(wheel).read(info + "METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Provides-Extra: dev" not in metadata
    assert "tubemq_aio/py.typed" in names
    assert "tubemq_aio/cli/__init__.py" in names
    assert "_tubemq_aio_entry.py" in names  # the console commands' light entry module
    assert "tubemq_aio/testing/runtime-pom.xml" in names
    assert "tubemq_aio/testing/runtime-pom-1.x.xml" in names  # LocalCluster(version="1.2.0-…")
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    # Pure Python, whatever the source tree holds: no extension, no Cython sources.
    assert wheel.name.endswith("-py3-none-any.whl")
    assert "tubemq_aio/_speedups/__init__.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyx", ".c"))]

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, clear=True)
    bin_dir = env_dir / "bin"
    installed = _run(
        [
            str(bin_dir / "python"),
            *shlex.split("-m pip install -q --disable-pip-version-check"),
            str(wheel),
        ],
        cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stderr.decode()[-2000:]

    work = tmp_path / "elsewhere"
    work.mkdir()
    probe = _run([str(bin_dir / "python"), "-c", PROBE], cwd=work)
    assert probe.returncode == 0, probe.stderr
    where, versions = probe.stdout.decode().splitlines()
    assert Path(where).is_relative_to(env_dir)
    assert versions == f"{tubemq_aio.__version__} {tubemq_aio.__version__}"
    pure = _run([str(bin_dir / "python"), "-c", PURE_PROBE], cwd=work)
    assert pure.returncode == 0, pure.stderr
    assert pure.stdout == b"None tubemq_aio.protocol.framing\n"

    cli = str(bin_dir / "tubemq-aio")
    helped = _run([cli, "--help"], cwd=work)
    assert helped.returncode == 0, helped.stderr
    assert b"produce" in helped.stdout
    master = cluster.master_addr
    sent = _run(
        [cli, "produce", "--master", master, "--topic", topic], cwd=work, stdin=b"from the wheel\n"
    )
    assert sent.returncode == 0, sent.stderr
    got = _run(
        [
            cli,
            *shlex.split(
                f"consume --master {master} --topic {topic} --group wheel_check "
                "--from earliest --count 1 --timeout 90 --format raw"
            ),
        ],
        cwd=work,
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout == b"from the wheel\n"
