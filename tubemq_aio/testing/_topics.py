"""Topic administration through the master web API: add, check readiness, delete."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tubemq_aio.testing._errors import ClusterStartError, NodeNotReadyError, WebApiError
from tubemq_aio.testing._nodes import BrokerNode
from tubemq_aio.testing._webapi import MasterWebApi

__all__ = [
    "MASTER_TOPIC_NAME",
    "MAX_TOPIC_PARTITIONS",
    "add_topics",
    "delete_topic",
    "topic_ready",
    "wait_topics_ready",
]

#: The topic names the master's web API takes (``WebFieldDef.TOPICNAME``: ``^[a-zA-Z]\w+$``,
#: at most ``META_MAX_TOPICNAME_LENGTH`` = 64 characters).
MASTER_TOPIC_NAME = re.compile(r"[a-zA-Z]\w{1,63}", re.ASCII)
#: Most partitions per broker the harness creates a topic with (``cluster up --topic NAME:N``).
MAX_TOPIC_PARTITIONS = 1000


async def add_topics(
    api: MasterWebApi, names: Sequence[str], broker_ids: Sequence[int], partitions: int, stores: int
) -> None:
    """Add topic records for every (topic, broker) pair in one call, checking every item.

    Args:
        api: Master web API.
        names: Topic names.
        broker_ids: Brokers that carry the topics.
        partitions: Partitions per broker and store.
        stores: Topic stores per broker.
    """
    await api.call(
        "admin_add_new_topic_record",
        modify=True,
        topicName=list(names),
        brokerId=list(broker_ids),
        numPartitions=partitions,
        numTopicStores=stores,
        deletePolicy="delete,1h",
        acceptPublish=True,
        acceptSubscribe=True,
    )


async def topic_ready(api: MasterWebApi, name: str) -> bool:
    """Tell whether ``name`` accepts publish and subscribe on all its configured partitions.

    Args:
        api: Master web API.
        name: Topic name.

    Returns:
        True when the master reports it fully publishable and subscribable.
    """
    items = await api.call("admin_query_topic_info", topicName=name)
    if not items:
        return False
    info = items[0]
    total = info.get("totalCfgNumPart")
    return bool(
        info.get("isSrvAcceptPublish")
        and info.get("isSrvAcceptSubscribe")
        and isinstance(total, int)
        and total > 0
        and info.get("totalRunNumPartCount") == total
    )


async def wait_topics_ready(
    api: MasterWebApi,
    names: Sequence[str],
    brokers: Callable[[], list[BrokerNode]],
    timeout: float,
    log_file: Path,
) -> None:
    """Poll until every topic in ``names`` is publishable, failing fast if a broker dies.

    Args:
        api: Master web API.
        names: Topic names.
        brokers: Returns the brokers that must stay alive meanwhile.
        timeout: Seconds allowed.
        log_file: Log named in a timeout error.

    Raises:
        NodeNotReadyError: On timeout.
        ClusterStartError: If a broker is not running.
    """
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        for broker in brokers():
            if not broker.running:
                raise ClusterStartError(f"{broker.name} is not running", broker.out_file)
        with contextlib.suppress(WebApiError):
            pending = [n for n in pending if not await topic_ready(api, n)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise NodeNotReadyError(
                f"topics {pending} not publishable within {timeout:.0f}s", log_file
            )
        await asyncio.sleep(0.5)


async def delete_topic(
    api: MasterWebApi, name: str, broker_ids: Sequence[int], timeout: float = 60.0
) -> None:
    """Delete a topic: stop publish/subscribe, soft-delete, remove, wait until it is gone.

    Args:
        api: Master web API.
        name: Topic name.
        broker_ids: Brokers carrying it.
        timeout: Seconds allowed for the brokers to drop it.

    Raises:
        NodeNotReadyError: If the master still lists it after ``timeout``.
    """
    ids = list(broker_ids)
    await api.call(
        "admin_modify_topic_info",
        modify=True,
        topicName=name,
        brokerId=ids,
        acceptPublish=False,
        acceptSubscribe=False,
    )
    await api.call("admin_delete_topic_info", modify=True, topicName=name, brokerId=ids)
    await api.call("admin_remove_topic_info", modify=True, topicName=name, brokerId=ids)
    # The record is only dropped once the brokers have synced the removal (a few heartbeats).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = await api.call("admin_query_topic_info", topicName=name)
        if not items or not items[0].get("topicInfo"):
            return
        await asyncio.sleep(0.5)
    raise NodeNotReadyError(f"topic {name} still listed {timeout:.0f}s after removal", api.log_file)
