"""A topic's partitions and their offsets, as ``GET /v1/topics/{topic}`` shows them.

The master's client protocol has no call that lists a topic's offsets; a throw-away
client-balanced consumer (a planning group of its own, named after the deployment) asks the
master for the topic's partitions (``GetPartMeta``) and each broker for a partition store's
bounds (one register at offset 0, then an unregister: see
:meth:`~tubemq_aio.ClientBalancedConsumer.offset_bounds`). It reads no message and commits
nothing for any real group. The whole look is bounded by one deadline.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tubemq_aio.consumer import ClientBalancedConsumer
from tubemq_aio.errors import TubeMQError
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.errors import TubeUnavailableError

__all__ = ["TopicOffsets", "TopicPartition", "cluster_topic_offsets"]


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """One partition of a topic.

    Attributes:
        partition_key: ``"<broker id>:<topic>:<partition id>"``, as leases and lag name it.
        broker: ``host:port`` of the broker serving it.
        partition_id: the partition's number on that broker.
        subscribable: whether the broker accepts consumers on it now.
        min_offset: the first offset the broker still holds (index units, as the broker
            counts them; partitions of one broker store share one index).
        max_offset: the offset the next message gets.
    """

    partition_key: str
    broker: str
    partition_id: int
    subscribable: bool
    min_offset: int
    max_offset: int


#: Reads a topic's partitions (``topic`` -> partitions, sorted by key). Raises
#: :class:`TubeUnavailableError` when the cluster does not answer within its deadline.
TopicOffsets = Callable[[str], Awaitable[list[TopicPartition]]]


def cluster_topic_offsets(config: GatewayConfig, *, reuse: float = 1.0) -> TopicOffsets:
    """The :data:`TopicOffsets` of the cluster ``config`` names (its TLS and credentials too).

    Each read runs within ``2 x config.rpc_timeout`` seconds (a master and a broker call per
    partition, in order). Callers asking for the same topic at once share one read, and a
    read's answer is reused for ``reuse`` seconds, so a dashboard polled by many browsers
    costs the cluster one read per topic per ``reuse``. Only configured topics reach it (the
    route checks first), so what it remembers is bounded by the configuration.
    """
    reads: dict[str, asyncio.Task[list[TopicPartition]]] = {}
    answers: dict[str, tuple[float, list[TopicPartition]]] = {}

    async def read(topic: str) -> list[TopicPartition]:
        now = time.monotonic()
        known = answers.get(topic)
        if known is not None and now - known[0] < reuse:
            return list(known[1])
        task = reads.get(topic)
        if task is None:
            task = reads[topic] = asyncio.create_task(_read_topic(config, topic))
            task.add_done_callback(lambda _t: reads.pop(topic, None))
        found = await asyncio.shield(task)
        answers[topic] = (time.monotonic(), found)
        return list(found)

    return read


async def _read_topic(config: GatewayConfig, topic: str) -> list[TopicPartition]:
    """One read of ``topic``'s partitions and offsets (see :func:`cluster_topic_offsets`).

    Raises:
        TubeUnavailableError: the cluster did not answer within the deadline.
    """
    group = f"gw-{config.deployment}-topics-{secrets.token_hex(4)}"
    try:
        async with asyncio.timeout(2 * config.rpc_timeout):
            async with ClientBalancedConsumer(
                config.masters,
                group=group,
                topics=[topic],
                rpc_timeout=config.rpc_timeout,
                **config.tubemq.client_options(),
            ) as planner:
                out = []
                for meta in sorted(await planner.partitions(), key=lambda m: m.partition_key):
                    low, high = await planner.offset_bounds(meta.partition_key)
                    out.append(
                        TopicPartition(
                            meta.partition_key,
                            meta.broker,
                            meta.partition_id,
                            meta.subscribable,
                            low,
                            high,
                        )
                    )
                return out
    except (TubeMQError, TimeoutError) as exc:
        raise TubeUnavailableError(f"reading the partitions of {topic!r}: {exc!r}") from exc
