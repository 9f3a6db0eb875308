"""The time-search scenario shared by the fake and real-cluster tests (docs/protocol/time.md).

Three bursts of messages whose ``msg_time`` minutes are two apart (the pauses between the
bursts are in the producers' clock: ``msg_time`` is minute-granular, so waiting minutes for
real would only slow the test). Starting at a pause's time must yield exactly the later bursts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tubemq_aio import ClientBalancedConsumer, Producer

__all__ = ["Bursts", "produce_bursts", "read_to_end"]

PER_BURST = 9


@dataclass(frozen=True)
class Bursts:
    """What :func:`produce_bursts` sent.

    Attributes:
        bodies: the bodies of each burst, in order.
        pauses: an aware time inside each pause (between burst i and i+1).
        before: a time before the first burst; ``after``: one after the last.
    """

    bodies: list[list[bytes]]
    pauses: list[datetime]
    before: datetime
    after: datetime

    def later(self, pause: int) -> set[bytes]:
        """The bodies of every burst after pause ``pause``."""
        return {b for burst in self.bodies[pause + 1 :] for b in burst}


async def produce_bursts(master: str, topic: str, tag: str = "") -> Bursts:
    """Send three bursts stamped two minutes apart (UTC wall time, the default
    ``msg_time_zone``), one message after the other so each partition's order is the send
    order."""
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    bodies: list[list[bytes]] = []
    async with Producer(master, topics=[topic]) as producer:
        for n in range(3):
            stamp = (base + timedelta(minutes=2 * n)).replace(tzinfo=None)
            burst = [f"{tag}b{n}-{i}".encode() for i in range(PER_BURST)]
            for body in burst:
                await producer.send(topic, body, msg_time=stamp)
            bodies.append(burst)
    pauses = [base + timedelta(minutes=1, seconds=30), base + timedelta(minutes=3, seconds=10)]
    return Bursts(bodies, pauses, base - timedelta(hours=1), base + timedelta(minutes=5))


async def read_to_end(consumer: ClientBalancedConsumer, key: str, offset: int) -> list[bytes]:
    """Every message of partition ``key`` from ``offset`` to its end, by positioned reads."""
    got: list[bytes] = []
    read = await consumer.read_at(key, offset)
    while read.messages:
        got.extend(m.body for m in read.messages)
        read = await consumer.read_next(key, read.next_offset)
    return got
