"""A topic name that UTF-8 cannot encode is refused before it reaches the producer's state.

Found by feeding the send API unicode edge cases: ``send("\\ud800", ...)`` (a lone surrogate,
as ``os.fsdecode`` or ``surrogateescape`` make from undecodable bytes) raised a bare
``UnicodeEncodeError`` after the topic had joined the published topics; the next heartbeat
could not encode its topic list, the heartbeat task crashed, and every later send of every topic
raised ``ClientClosedError``. Now each entry point refuses it as a bad argument
(``InvalidMessageError`` or ``ConfigError``) and the producer goes on.
"""

from __future__ import annotations

import pytest

from tubemq_aio import ConfigError, InvalidMessageError, Producer, SendResult
from tubemq_aio.testing import FakeCluster

pytestmark = pytest.mark.timeout(60)
LONE = "t\ud800"


async def test_a_topic_utf8_cannot_encode_is_refused_and_the_producer_goes_on() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        with pytest.raises(InvalidMessageError, match="UTF-8"):
            await producer.send(LONE, b"x", timeout=2)
        with pytest.raises(InvalidMessageError, match="UTF-8"):
            await producer.send(LONE, b"x", key="k")
        with pytest.raises(InvalidMessageError, match="UTF-8"):
            await producer.send_many(LONE, [b"x"])
        with pytest.raises(InvalidMessageError, match="UTF-8"):
            producer.send_nowait(LONE, b"x")
        with pytest.raises(ConfigError, match="UTF-8"):
            await producer.publish([LONE])
        # Refused before send_nowait returns, as its docstring says (it failed in the future).
        with pytest.raises(InvalidMessageError, match="at most 64"):
            producer.send_nowait("t" * 65, b"x")
        assert producer.topics == ("demo",)
        await producer._require_session().heartbeat()  # encodes the published topics
        assert isinstance(await producer.send("demo", b"after"), SendResult)
        assert cluster.bodies("demo") == [b"after"]


def test_a_configured_topic_utf8_cannot_encode_is_refused() -> None:
    with pytest.raises(ConfigError, match="UTF-8"):
        Producer("127.0.0.1:8715", topics=["demo", LONE])
