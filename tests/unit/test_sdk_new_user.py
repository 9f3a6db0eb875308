"""A bad argument's error names the call the user made, not an internal one (no I/O: the
checks come before the client is asked whether it runs)."""

from __future__ import annotations

import pytest

from tubemq_aio import ClientBalanceConfigError, ClientBalancedConsumer


@pytest.mark.parametrize("call", ["read_at", "read_next", "peek_at"])
@pytest.mark.parametrize("offset", [-5, 2**63, 1.0, "0", None])
async def test_a_bad_read_offset_is_named_with_the_read_called(call: str, offset: object) -> None:
    """``read_at(key, -5)`` said ``read_with: offset must be ...``, a method not called."""
    consumer = ClientBalancedConsumer("127.0.0.1:1", group="g1", topics=["t"])
    with pytest.raises(ClientBalanceConfigError, match=rf"^{call}: offset must be an integer"):
        await getattr(consumer, call)("1:t:0", offset)


async def test_a_bad_connect_offset_is_named_with_connect() -> None:
    """``connect(key, -1)`` said ``bootstrap offset: offset must be ...``."""
    consumer = ClientBalancedConsumer("127.0.0.1:1", group="g1", topics=["t"])
    with pytest.raises(ClientBalanceConfigError, match=r"^connect: offset must be an integer"):
        await consumer.connect("1:t:0", -1)
