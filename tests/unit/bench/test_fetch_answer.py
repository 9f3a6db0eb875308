"""The per-message count's counted side (``benchmarks.micro.fetch_answer``): the answer it
builds is a real GetMessage answer of the asked shape, and its rounds walk the fetch path."""

from __future__ import annotations

import orjson
import pytest

from benchmarks.micro import fetch_answer
from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages
from tubemq_aio.protocol.consumer_replies import parse_get_message_response


@pytest.mark.parametrize("attributes", [False, True])
def test_the_built_answer_parses_to_the_asked_messages(attributes: bool) -> None:
    got = parse_get_message_response(fetch_answer.answer(7, 30, attributes))
    assert got.success
    assert len(got.messages) == 7
    assert [m.message_id for m in got.messages] == [2**40 + i for i in range(7)]
    decoded = list(FetchedMessages("t", "1:t:0", got.messages))
    assert [m.body for m in decoded] == [b"x" * 30] * 7
    assert [m.attributes for m in decoded] == [{"k": "v"} if attributes else {}] * 7
    body = orjson.loads(FetchedMessages("t", "1:t:0", got.messages).json(False))
    assert [m["value"] for m in body] == ["x" * 30] * 7


def test_rounds_walk_the_path_and_bad_arguments_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fetch_answer.rounds(2, 5, 10, True)  # raises if the answer were screened as damaged
    assert fetch_answer.main(["run", "1", "3", "4", "0"]) == 0
    with pytest.raises(SystemExit):
        fetch_answer.main(["--batch", "0"])
    assert "--batch" in capsys.readouterr().err
