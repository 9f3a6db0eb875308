"""Which ends of a broker call leave its request on the way (``protocol.call_outcome``): a
timeout or a connection lost after the write may still be executed by the broker later; an
answer, or a request never written, cannot."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio.errors import (
    ConnectError,
    ConnectionLostError,
    RemoteProtocolError,
    RemoteRpcError,
    RequestNotSentError,
    RequestTimeoutError,
    ServerError,
)
from tubemq_aio.protocol.call_outcome import may_still_arrive


@pytest.mark.parametrize(
    "error",
    [
        RequestTimeoutError("no answer"),
        ConnectionLostError("lost after the write"),
        asyncio.CancelledError(),
        OSError("broken pipe"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_call_without_answer_may_still_arrive(error: BaseException) -> None:
    assert may_still_arrive(error)


@pytest.mark.parametrize(
    "error",
    [
        ServerError(500, "refused"),
        RemoteRpcError("java.lang.Exception", "no service"),
        RemoteProtocolError("garbled answer"),
        RequestNotSentError("lost before the write"),
        ConnectError("refused"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_an_answered_or_unsent_call_cannot(error: BaseException) -> None:
    assert not may_still_arrive(error)
