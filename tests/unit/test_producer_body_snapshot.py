"""A ``bytearray`` or ``memoryview`` body is copied when ``send``, ``send_nowait`` or
``send_many`` is called: what is stored is the body as it was then, whatever the caller does
with its buffer afterwards (a buffer reused for the next message is the common case).

The copy was made when the message was encoded: after ``send_nowait`` had returned (its send
runs in a task), and after a ``send`` or ``send_many`` had waited for its topic's first
publish, so a caller that refilled its buffer meanwhile had the new content stored (with a
retry, the new content under the old message's send)."""

from __future__ import annotations

import asyncio

from tubemq_aio import Producer, SendResult
from tubemq_aio.testing import FakeCluster

ORIGINAL = b"original body"


def _buffers() -> list[bytearray | memoryview]:
    return [bytearray(ORIGINAL), memoryview(bytearray(ORIGINAL))]


def _overwrite(buffer: bytearray | memoryview) -> None:
    buffer[:] = b"X" * len(ORIGINAL)


async def test_send_nowait_sends_the_body_as_it_was_when_called() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"], telemetry=False) as producer:
            for buffer in _buffers():
                future = producer.send_nowait("demo", buffer)  # type: ignore[arg-type]
                _overwrite(buffer)  # the caller reuses its buffer at once
                assert isinstance(await future, SendResult)
        assert cluster.bodies("demo") == [ORIGINAL, ORIGINAL]


async def test_send_waiting_for_its_topic_sends_the_body_as_it_was_when_called() -> None:
    async with FakeCluster(topics={"demo": 1, "other": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["other"], telemetry=False) as producer:
            buffers = _buffers()
            one = asyncio.ensure_future(producer.send("demo", buffers[0]))  # type: ignore[arg-type]
            bodies: list[bytes] = [b"first", buffers[1]]  # type: ignore[list-item]
            many = asyncio.ensure_future(producer.send_many("demo", bodies))
            await asyncio.sleep(0)  # both wait for the topic's first publish now
            for buffer in buffers:
                _overwrite(buffer)
            sent, results = await one, await many
        assert isinstance(sent, SendResult)
        assert all(isinstance(r, SendResult) for r in results)
        assert sorted(cluster.bodies("demo")) == sorted([ORIGINAL, b"first", ORIGINAL])


async def test_attributes_are_sent_as_they_were_when_called() -> None:
    """The same kind as the body: the attributes mapping was read when the message was encoded,
    after ``send_nowait`` had returned or a ``send_many`` had waited for its topic."""
    async with FakeCluster(topics={"demo": 1, "other": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["other"], telemetry=False) as producer:
            attributes = {"k": "before"}
            many = asyncio.ensure_future(producer.send_many("demo", [b"m"], attributes=attributes))
            await asyncio.sleep(0)  # it waits for the topic's first publish now
            attributes["k"] = "after"
            await many
            attributes = {"k": "before"}
            future = producer.send_nowait("demo", b"n", attributes=attributes)
            attributes["k"] = "after"
            await future
        payloads = [m.payload for m in cluster.messages("demo")]
        assert len(payloads) == 2
        assert all(b"k=before" in p and b"after" not in p for p in payloads), payloads
