"""``tubemq-aio consume`` leaves ``join_heartbeat_interval`` automatic, so the consumer's own rule
applies (``join_heartbeat_in_effect``): 1 s against loopback masters, such as the cluster
``cluster up`` starts and records (a local test cluster balances every 2 s), and the Java
client's heartbeats against any other; the real-cluster run of the command is
tests/integration/test_first_message.py."""

from __future__ import annotations

from typing import Any

import pytest

from tubemq_aio.cli import _consume
from tubemq_aio.cli._connect import open_client
from tubemq_aio.cli._parser import build_parser
from tubemq_aio.consumer import Consumer
from tubemq_aio.consumer.config import LOOPBACK_JOIN_HEARTBEAT


class _Built(Exception):
    """Stops ``_open`` right after it made its consumer (nothing is started)."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__()
        self.consumer = consumer


async def _cli_consumer(monkeypatch: pytest.MonkeyPatch, master: str) -> Consumer:

    def capture(cls: Any, args: Any, **options: Any) -> Any:
        raise _Built(open_client(cls, args, **options))

    monkeypatch.setattr(_consume, "open_client", capture)
    args = build_parser().parse_args(
        ["consume", "--master", master, "--topic", "t1", "--group", "g1"]
    )
    with pytest.raises(_Built) as built:
        async with _consume._open(args):
            pass
    return built.value.consumer


@pytest.mark.parametrize(
    "master", ["127.0.0.1:8715", "localhost:8715", "[::1]:8715", "tubemq://127.0.0.1:8715"]
)
async def test_a_loopback_master_gets_the_join_interval(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    consumer = await _cli_consumer(monkeypatch, master)
    assert consumer.config.join_heartbeat_interval is None  # automatic: nothing forced
    assert consumer.config.join_heartbeat == LOOPBACK_JOIN_HEARTBEAT


@pytest.mark.parametrize("master", ["10.0.0.7:8715", "127.0.0.1:8715,10.0.0.7:8715"])
async def test_any_other_master_heartbeats_as_java(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    consumer = await _cli_consumer(monkeypatch, master)
    assert consumer.config.join_heartbeat is None
