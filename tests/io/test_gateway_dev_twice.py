"""``tubemq-gateway dev --key-file gw.key`` started a second time (another terminal, the same
directory and port) while the first runs: the second cannot listen and says so, and it must
leave the first one's key file alone. It used to write its own key into the file and then
remove it on the way out, so scripts reading ``gw.key`` lost the running gateway's key."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_dev import ROOT, dev_env, start_dev

#: Runs `tubemq-gateway dev` as processes: `make test` runs it, `make unit` does not.
pytestmark = pytest.mark.system


def test_a_second_dev_on_a_busy_port_leaves_the_first_ones_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "gw.key"
    first = start_dev(["--fake", "--key-file", str(key_file)], tmp_path / "tmp1")
    try:
        assert key_file.read_text().strip() == first.key
        port = int(first.url.rsplit(":", 1)[1])
        (tmp_path / "tmp2").mkdir()
        second = subprocess.run(
            [
                sys.executable,
                *shlex.split("-m tubemq_aio.gateway dev --fake --key-file"),
                str(key_file),
            ],
            cwd=ROOT,
            env=dev_env(tmp_path / "tmp2", port),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in second.stderr, (
            second.stderr
        )
        assert key_file.read_text().strip() == first.key  # still the running gateway's key
        auth = {"Authorization": f"Bearer {key_file.read_text().strip()}"}
        r = httpx.get(f"{first.url}/v1/topics", headers=auth, timeout=30)
        assert r.status_code == 200, r.text
        assert first.stop() == 0
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait(10)
    assert not key_file.exists()  # the first one removes its own file on exit
