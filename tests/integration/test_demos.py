"""``make demo`` and ``make gateway-demo`` as a user runs them: each starts its own real cluster
(and the gateway demo Redis and one replica), prints what it does and stops everything again.

The README's first screen names ``make demo`` as the main job; its block is not run by the
docs test (it starts a cluster), so it is run here: the module the target runs, as a
subprocess, with a smaller message count.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from tests.support.cli_run import SOURCE_ROOT, cli_env

#: Seconds each demo may take: a cluster start (~40 s, plus the master's ~30 s topic step),
#: the run, and the stop, on a machine running other tests beside it.
DEMO_TIMEOUT = 420


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=SOURCE_ROOT,
        timeout=DEMO_TIMEOUT,
    )


def test_make_demo_produces_and_consumes_every_message_and_stops_the_cluster() -> None:
    done = _run("-m", "tubemq_aio.demo", "--messages", "300")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^cluster ready in \d+ s; master at 127\.0\.0\.1:\d+$", out, re.M), out
    assert re.search(r"^produced 300 messages in ", out, re.M), out
    assert re.search(r"^consumed 300 distinct messages in ", out, re.M), out
    per_partition = re.search(r"^  per partition: (\{.*\})$", out, re.M)
    assert per_partition is not None, out
    assert len(ast.literal_eval(per_partition.group(1))) == 3, out  # the topic's three partitions
    assert "  per msg_type:  {'even': 150, 'odd': 150}" in out, out
    assert out.rstrip().endswith("cluster stopped"), out


@pytest.mark.parametrize("value", ["0", "-5", "many", "1e3", ""])
def test_make_demo_refuses_a_message_count_that_is_not_a_positive_whole_number(
    value: str,
) -> None:
    done = _run("-m", "tubemq_aio.demo", "--messages", value)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--messages" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "starting a local TubeMQ cluster" not in done.stdout  # refused before anything ran


def test_make_gateway_demo_produces_fetches_and_acks_over_http() -> None:
    done = _run("-m", "tubemq_aio.gateway.demo")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^gateway replica listening on http://127\.0\.0\.1:\d+$", out, re.M), out
    assert out.count("/v1/topics/demo/messages") == 3, out
    assert '"status": "ok"' in out, out  # a fetch got the batch
    assert '"result": "acked"' in out, out
    assert out.rstrip().endswith("demo done: produce -> fetch -> ack worked"), out
