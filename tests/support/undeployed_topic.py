"""The check both consumer kinds share on the real cluster: a start with a topic the master says
is not deployed (431) fails at once with ``TopicNotDeployedError`` (issue 32)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tubemq_aio.consumer import ClientBalancedConsumer, Consumer
from tubemq_aio.errors import ServerError, TopicNotDeployedError

__all__ = ["MISSING_TOPIC", "fails_at_once_naming_the_missing_topic"]

#: A topic no test cluster deploys.
MISSING_TOPIC = "no_such_topic_431"


async def fails_at_once_naming_the_missing_topic(
    make: Callable[..., Consumer | ClientBalancedConsumer], topics: list[str]
) -> None:
    """Start ``make(topics=..., register_attempts=..., register_fail_wait=...)`` and check the
    error: ``TopicNotDeployedError`` naming only :data:`MISSING_TOPIC`, still a ``ServerError``
    431 with the master's own text, raised before the register's retries would have ended."""
    attempts, wait = 5, 2.0
    consumer = make(
        topics=[*topics, MISSING_TOPIC], register_attempts=attempts, register_fail_wait=wait
    )
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(TopicNotDeployedError) as info:
        await consumer.start()
    assert loop.time() - began < (attempts - 1) * wait  # before the register deadline
    assert info.value.topics == (MISSING_TOPIC,)
    assert isinstance(info.value, ServerError)
    assert info.value.err_code == 431
    assert MISSING_TOPIC in info.value.err_msg  # the master's own text
    await consumer.close()
