"""A broker's client port given for a master's: its answer ``No service 1 found on the server``
is a :class:`NoMasterServiceError` naming the address and the master's port, at once when no
other address is a master (a Producer or Consumer start retried it for ~4 s and said only
``ServiceNotPublishedError: ... No service 1 found on the server``)."""

from __future__ import annotations

import pickle

import pytest

from tests.support.master_scripts import A, B, C, ScriptedRpc, call, timed
from tubemq_aio import NoMasterServiceError, ServiceNotPublishedError, TubeMQError
from tubemq_aio.errors import NO_MASTER_SERVICE_TEXT, ConnectError, remote_error_for
from tubemq_aio.protocol.retry import retry_can_help

JAVA = "java.lang.Exception"


def no_master() -> NoMasterServiceError:
    error = remote_error_for(JAVA, NO_MASTER_SERVICE_TEXT, fatal=False)
    assert type(error) is NoMasterServiceError
    return error


def test_the_answer_is_typed_under_the_not_published_error_but_not_retriable() -> None:
    error = no_master()
    assert isinstance(error, ServiceNotPublishedError)
    assert isinstance(error, TubeMQError)
    assert not error.retriable
    assert not retry_can_help(error)
    # A node starting, and a broker's other services, stay what they were.
    for text in (
        "No service 3 found on the server",
        "No method 1 in service 1 found on the server",
    ):
        other = remote_error_for(JAVA, text, fatal=False)
        assert type(other) is ServiceNotPublishedError
        assert other.retriable


async def test_the_only_master_address_answering_so_fails_the_call_at_once() -> None:
    rpc = ScriptedRpc({A: no_master()})
    invoker, time = timed(rpc, [A], timeout=10)
    with pytest.raises(NoMasterServiceError) as caught:
        await call(invoker)
    assert rpc.calls == [A]
    assert time.pauses == []  # no retry round
    text = str(caught.value)
    assert "No service 1 found on the server" in text
    assert f"{A} is a TubeMQ node without the master service" in text
    assert "broker's client port" in text
    assert "8715" in text
    assert caught.value.address == str(A)


async def test_another_address_that_is_a_master_is_tried_and_kept() -> None:
    rpc = ScriptedRpc({A: no_master(), B: None})
    invoker, _ = timed(rpc, [A, B], timeout=10)
    assert (await call(invoker)).errCode == 200
    assert invoker.current == B


async def test_an_unreachable_master_is_retried_but_the_broker_is_not_asked_again() -> None:
    rpc = ScriptedRpc({A: no_master(), B: ConnectError("refused"), C: no_master()})
    invoker, time = timed(rpc, [A, B, C], timeout=3)
    with pytest.raises(ConnectError):  # B may be a master restarting: its error, at the deadline
        await call(invoker)
    assert time.pauses  # retried rounds, only B each time
    assert rpc.calls.count(A) == 1
    assert rpc.calls.count(C) == 1
    assert rpc.calls.count(B) == len(time.pauses)  # the last pause ends at the deadline


async def test_the_error_keeps_every_address_reason_the_broker_port_first() -> None:
    """Every address a broker's port or unreachable: the error said only why the last one
    failed (``cannot connect to c:3``), so the hint that an address is a broker's was lost."""
    rpc = ScriptedRpc({A: ConnectError("refused"), B: no_master(), C: ConnectError("reset")})
    invoker, _ = timed(rpc, [A, B, C], timeout=3)
    with pytest.raises(ConnectError) as caught:  # typed as before: the last attempt's error
        await call(invoker)
    text = str(caught.value)
    assert text.index(f"{B} is a TubeMQ node without the master service") < text.index(
        f"{A}: refused"
    )
    assert text.index(f"{A}: refused") < text.index(f"{C}: reset")
    assert "8715" in text


async def test_every_address_a_broker_port_names_each() -> None:
    rpc = ScriptedRpc({A: no_master(), B: no_master()})
    invoker, _ = timed(rpc, [A, B], timeout=3)
    with pytest.raises(NoMasterServiceError) as caught:
        await call(invoker)
    for address in (A, B):
        assert f"{address} is a TubeMQ node without the master service" in str(caught.value)


def test_it_survives_pickling_with_its_address() -> None:
    error = NoMasterServiceError(JAVA, NO_MASTER_SERVICE_TEXT, address="h:8123")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is NoMasterServiceError
    assert (back.address, back.remote_message, str(back)) == (
        "h:8123",
        NO_MASTER_SERVICE_TEXT,
        str(error),
    )
