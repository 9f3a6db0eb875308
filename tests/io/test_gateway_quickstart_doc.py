"""The two-minute path at the top of docs/gateway.md, run as written: its first shell block
(``tubemq-gateway dev …``) in the background, its JavaScript saved as the file it names, its
other shell blocks in order in one bash script. The one change: the port (8080 in the text) is
a free one, given to the dev gateway as ``TUBEMQ_GATEWAY_PORT`` and replaced in the commands."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.gateway_dev import ROOT, alive, dev_env, start_dev

#: Runs the dev gateway and Node.js as processes: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system

DOC = ROOT / "docs" / "gateway.md"
SECTION = "## Two minutes with curl and JavaScript"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def quickstart_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block of the section, in order."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text[start:end])]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_two_minute_path_runs_as_written(tmp_path: Path) -> None:
    blocks = quickstart_blocks()
    shells = [code for lang, code in blocks if lang == "bash"]
    scripts = [code for lang, code in blocks if lang == "javascript"]
    assert shells[0].strip().startswith("tubemq-gateway dev")
    assert len(scripts) == 1
    assert "node quickstart.mjs" in shells[-1]
    work = tmp_path / "work"
    work.mkdir()
    (work / "quickstart.mjs").write_text(scripts[0])
    port = free_port()
    dev = start_dev([], tmp_path / "tmp", shell=shells[0].strip(), cwd=work, port=port)
    try:
        assert dev.url == f"http://127.0.0.1:{port}"
        children = dev.descendants()
        script = "set -euo pipefail\n" + "\n".join(shells[1:]).replace("8080", str(port))
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env=dev_env(tmp_path / "tmp", port),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert '"partition_key":' in out  # the produce
        assert '"status":"ok"' in out  # the fetch
        assert out.count('{"result":"acked"}') == 1  # curl's ack
        assert '"name":"demo"' in out  # the listings
        assert '"leases":' in out
        assert "from JS" in out  # node fetched what it produced
        assert "result: 'acked'" in out  # and acked it
        assert (work / "gw.key").is_file()
        assert dev.stop() == 0
    finally:
        if dev.proc.poll() is None:
            dev.proc.kill()
            dev.proc.wait(10)
    assert not (work / "gw.key").exists()
    assert not [pid for pid in children if alive(pid)]
