"""Which Go client the Go peer is built against: the module proxy, or a local source given by
``--go-client-src`` / ``TUBEMQ_GO_CLIENT_SRC`` (a scripted ``go`` stands in for the toolchain:
the proxy's refusal cannot be produced on demand, and a real build takes minutes)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from benchmarks.peers import build

REFUSAL = (
    "main.go:26:2: {module}@{version}: reading https://proxy.invalid/{module}/@v/{version}.zip: "
    "403 Forbidden\n\tserver response: This module version is not available.\n"
)


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``go`` on PATH that refuses the module in a proxy build, and otherwise writes ``-o``;
    each call is appended to ``calls.log``."""
    bindir = tmp_path / "tools"
    bindir.mkdir()
    refusal = REFUSAL.format(module=build.GO_CLIENT_MODULE, version=build.GO_CLIENT_VERSION)
    (tmp_path / "refusal.txt").write_text(refusal)
    script = bindir / "go"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{tmp_path}/calls.log"\n'
        'if [ "$1 $2" = "build -mod=readonly" ]; then\n'
        f'  cat "{tmp_path}/refusal.txt" >&2; exit 1\n'
        "fi\n"
        'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then echo bin > "$2"; fi; shift; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.delenv(build.GO_CLIENT_SRC_ENV, raising=False)
    peer = tmp_path / "peer"
    peer.mkdir()
    for name in ("main.go", "go.mod", "go.sum"):
        (peer / name).write_text(name)
    monkeypatch.setattr(build, "GO_DIR", peer)
    monkeypatch.setattr(build, "GO_BINARY", peer / "bin" / "benchpeer")
    monkeypatch.setattr(build, "GO_LOG_DIR", peer / "bin" / "log")
    monkeypatch.setattr(build, "GO_SOURCE_MARK", peer / "bin" / "benchpeer.source")
    src = tmp_path / "client-src"
    src.mkdir()
    (src / "go.mod").write_text(f"module {build.GO_CLIENT_MODULE}\n")
    return src


def test_without_a_local_source_the_proxy_refusal_is_reported_without_its_address(
    fake_go: Path,
) -> None:
    with pytest.raises(build.BuildError) as err:
        build.build_go()
    first = str(err.value).splitlines()[0]
    assert first.startswith("the Go module proxy does not serve")
    assert "(it answers 403 Forbidden: This module version is not available.)" in first
    assert "proxy.invalid" not in first
    assert build.go_build_source() is None


def test_a_local_source_is_used_through_a_replace_and_only_while_it_is_given(
    fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(build.GO_CLIENT_SRC_ENV, str(fake_go))
    assert build.build_go() == build.GO_BINARY
    assert build.go_build_source() == "local source"
    calls = (fake_go.parent / "calls.log").read_text()
    assert f"mod edit -replace={build.GO_CLIENT_MODULE}={fake_go.resolve()}" in calls
    assert (build.GO_DIR / "go.mod").read_text() == "go.mod"  # the repository is unchanged
    build.build_go()  # same source, nothing newer: no second build
    assert calls == (fake_go.parent / "calls.log").read_text()
    monkeypatch.delenv(build.GO_CLIENT_SRC_ENV)
    with pytest.raises(build.BuildError, match="does not serve"):
        build.build_go()  # the binary of a local build is not taken for a proxy build


def test_a_source_without_go_mod_is_refused(fake_go: Path) -> None:
    (fake_go / "go.mod").unlink()
    with pytest.raises(build.BuildError, match=r"holds no go\.mod"):
        build.build_go(client_src=fake_go)
