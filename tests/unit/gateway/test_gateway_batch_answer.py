"""The batch answer's items, written as text for stored messages: the same JSON as one dict
per item through orjson (odd partition keys, 64-bit ids, error items among them), the statuses
counted, and an unexpected exception raised instead of answered."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tubemq_aio.errors import SendOutcomeUnknownError
from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.api_errors import ApiError, api_error_for
from tubemq_aio.gateway.http.publishing import _items
from tubemq_aio.protocol.producer_send import SendResult


def answer(exc: BaseException) -> ApiError:
    error = api_error_for(exc)
    assert error is not None
    return error


def result(key: str, message_id: int, offset: int) -> SendResult:
    return SendResult("t", key, 0, 1, message_id, 1_764_000_000_000, offset)


def expected(index: int, outcome: SendResult | BaseException) -> dict[str, object]:
    """An item as the answer always wrote it (a dict per message)."""
    if isinstance(outcome, SendResult):
        return {
            "index": index,
            "status": 200,
            "partition_key": outcome.partition_key,
            "message_id": str(outcome.message_id),
            "append_offset": str(outcome.append_offset),
        }
    error = answer(outcome)
    body = {"code": error.code, "message": error.message, "retriable": error.retriable}
    return {"index": index, "status": error.status, "error": body}


OUTCOMES: list[SendResult | BaseException] = [
    result("1:demo:0", 0, 0),
    result("1:demo:1", 2**63 - 1, 2**63 - 1),
    result("1:demo:0", -1, -1),
    InvalidBodyError("value must not be empty"),
    result('7:odd"to\\pic\n:2', 12, 34),
    result("7:tópico😀:3", 56, 78),
    SendOutcomeUnknownError('no answer from "broker"'),
    result("1:demo:1", 9_007_199_254_740_993, 10),
]


def test_items_are_the_json_of_one_dict_per_item() -> None:
    got = _items(OUTCOMES, answer)
    text = orjson.dumps({"results": got.items})
    assert orjson.loads(text) == {"results": [expected(i, o) for i, o in enumerate(OUTCOMES)]}
    assert got.statuses == {200: 6, 422: 1, 504: 1}


@pytest.mark.parametrize("count", [0, 1, 500])
def test_all_stored_is_all_200(count: int) -> None:
    outcomes: list[SendResult | BaseException] = [
        result(f"1:demo:{i % 3}", 10**12 + i, i) for i in range(count)
    ]
    got = _items(outcomes, answer)
    assert orjson.loads(orjson.dumps(got.items)) == [expected(i, o) for i, o in enumerate(outcomes)]
    assert got.statuses == ({200: count} if count else {})


@pytest.mark.parametrize("unexpected", [RuntimeError("bug"), asyncio.CancelledError()])
def test_an_unexpected_exception_is_raised_not_answered(unexpected: BaseException) -> None:
    with pytest.raises(type(unexpected)):
        _items([result("1:demo:0", 1, 1), unexpected], answer)
