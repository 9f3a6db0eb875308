"""The fuzz driver: 10 000 inputs in every test run (``make fuzz`` runs a million), and the
regressions it found."""

from __future__ import annotations

import pytest

from tubemq_aio.errors import RemoteProtocolError
from tubemq_aio.protocol import consumer_replies
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.testing import fuzz

NOT_UTF8 = b"\xff\xfe"


def test_ten_thousand_inputs_end_in_values_or_typed_errors() -> None:
    report = fuzz.run(10_000, seed=20261123)
    assert [f"{f.target}: {f.error} at {f.where}" for f in report.findings] == []
    assert set(report.inputs) == set(fuzz.TARGETS)
    assert all(n >= 10_000 // len(fuzz.TARGETS) for n in report.inputs.values())
    # The inputs reach the error paths, not only the happy ones.
    assert sum(report.typed.values()) > 1_000


def test_the_same_seed_gives_the_same_run() -> None:
    first, second = fuzz.run(500, seed=5), fuzz.run(500, seed=5)
    assert first.typed == second.typed


def test_an_untyped_error_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: bytes) -> None:
        if data[0] % 2 == 0:
            raise IndexError("boom")

    target = fuzz._Target(lambda rng: rng.randbytes(2), broken)
    monkeypatch.setitem(fuzz.TARGETS, "broken", target)
    report = fuzz.run(200, seed=1, targets=["broken"])
    assert len(report.findings) == 1
    assert report.findings[0].error == "IndexError: boom"
    assert report.findings[0].count >= 1
    with pytest.raises(fuzz.UntypedError):
        fuzz.check("broken", b"\x00")
    fuzz.check("broken", b"\x01")


def _wire_string(field: int, value: bytes) -> bytes:
    return bytes(((field << 3) | 2, len(value))) + value


def test_non_utf8_rebalance_event_is_a_protocol_error() -> None:
    event = b"\x08\x07\x10\x01" + _wire_string(4, b"c@g#1:127.0.0.1:8123#t:" + NOT_UTF8)
    data = b"\x08\x01\x10\xc8\x01" + _wire_string(3, b"OK") + _wire_string(4, event)
    with pytest.raises(RemoteProtocolError, match="UTF-8"):
        consumer_replies.parse_master_response(5, data)


def test_valid_answers_still_parse() -> None:
    ok = broker_pb.HeartBeatResponseB2C(
        success=True, errCode=200, errMsg="OK!", failureInfo=["411:1:h:8123#t:0"]
    )
    parsed = consumer_replies.parse_broker_heartbeat_response(ok.SerializeToString())
    assert parsed.failures[0].err_code == 411


@pytest.mark.parametrize("inputs", [0, -1, 2.5, True, "10"], ids=repr)
def test_a_run_of_no_inputs_is_refused_not_passed(inputs: object) -> None:
    # 0 and -1 ran nothing and reported no finding: a fuzz step in CI that checked nothing.
    with pytest.raises(ValueError, match="inputs"):
        fuzz.run(inputs)  # type: ignore[arg-type]


def test_an_unknown_target_is_named() -> None:
    with pytest.raises(ValueError, match="nosuch"):  # a raw KeyError before
        fuzz.run(10, targets=["frame", "nosuch"])


def test_the_command_refuses_no_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        fuzz.main(["--inputs", "0"])
    assert info.value.code == 2
    assert "--inputs" in capsys.readouterr().err
