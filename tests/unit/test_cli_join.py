"""``tubemq-aio consume`` sets the consumer's ``join_heartbeat_interval`` for the cluster that
``cluster up`` recorded (a local test cluster balances every 2 s) and for no other; the
real-cluster run of the command is tests/integration/test_first_message.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tubemq_aio.cli._consume import LOCAL_JOIN_HEARTBEAT, _join_options


def test_the_recorded_master_gets_the_join_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "cluster.json"
    state.write_text(json.dumps({"master_addr": "127.0.0.1:8715"}))
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(state))
    assert _join_options("127.0.0.1:8715") == {"join_heartbeat_interval": LOCAL_JOIN_HEARTBEAT}
    assert _join_options("10.0.0.7:8715") == {}
    assert _join_options("") == {}


@pytest.mark.parametrize("content", [None, "not json", "[1, 2]", '{"master_addr": 5}'])
def test_no_or_a_broken_state_file_sets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None
) -> None:
    state = tmp_path / "cluster.json"
    if content is not None:
        state.write_text(content)
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(state))
    assert _join_options("127.0.0.1:8715") == {}
