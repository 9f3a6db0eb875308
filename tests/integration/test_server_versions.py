"""Smoke test of the older server versions: a real tubemq-server 1.x cluster per version.

The server-version matrix: the full client suite runs on the default version (2.4.0); this file
runs on each version in ``$TUBEMQ_AIO_SMOKE_VERSIONS`` (comma-separated; default
``1.2.0-incubating``, the one ``make test`` covers; ``make test-versions`` runs the others). One
cluster per version (this file is its own xdist group, ``tests/xdist_groups.py``): a ZooKeeper
node, the master (metadata in ZooKeeper) and one broker, with two-way TLS listeners and produce
and consume authentication on. Every client speaks ``cluster.framing`` (``"legacy-length"``
for 1.1.0 and 1.2.0, docs/protocol/wire.md §1.7). It proves that producer, both consumers, TLS
and authentication work there, and that a client with the standard framing gets the hint to
switch.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cli_run import run_cli
from tests.support.own_cluster import client_tls_context, start_or_fail, tls_file_args
from tubemq_aio import ClientBalancedConsumer, Credentials, Producer
from tubemq_aio.consumer import Consumer
from tubemq_aio.errors import AuthenticationError, TubeMQError
from tubemq_aio.testing import AuthSettings, LocalCluster, TlsMaterial, make_tls_material

SMOKE_VERSIONS = os.environ.get("TUBEMQ_AIO_SMOKE_VERSIONS", "1.2.0-incubating").split(",")
TOPICS = ["v12_a", "v12_b", "v12_c"]
USER = Credentials("alice", "s3cret")
N = 30


class Old:
    """A 1.x cluster and what a client needs to reach it."""

    def __init__(self, cluster: LocalCluster, material: TlsMaterial) -> None:
        """Keep ``cluster``, its TLS files and a client TLS context trusting it."""
        self.cluster = cluster
        self.material = material
        self.ctx: ssl.SSLContext = client_tls_context(material)
        addr = cluster.master_tls_addr
        assert addr is not None
        self.master = addr

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments every client of this cluster needs."""
        return {"framing": self.cluster.framing, "ssl_context": self.ctx, "credentials": USER}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=SMOKE_VERSIONS)
async def old(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Old]:
    """A 1-broker tubemq-server 1.x cluster with two-way TLS and authentication."""
    version: str = request.param
    material = await make_tls_material(Path(tmp_path_factory.mktemp("tls")))
    cluster = LocalCluster(
        1,
        version=version,
        topics=TOPICS,
        topic_partitions=2,
        tls=material.settings,
        auth=AuthSettings(produce_authenticate=True, consume_authenticate=True),
    )
    await start_or_fail(cluster, f"the {version} cluster")
    try:
        yield Old(cluster, material)
    finally:
        await cluster.stop()


async def _produce(old: Old, topic: str, prefix: bytes) -> list[bytes]:
    bodies = [prefix + b"-%d" % i for i in range(N)]
    async with Producer(old.master, topics=[topic], **old.client_kwargs()) as producer:  # type: ignore[arg-type]
        for body in bodies:
            await producer.send(topic, body, attributes={"v": "12"})
    return bodies


async def test_cluster_reports_version_framing_and_zookeeper(old: Old) -> None:
    """The cluster runs the requested jars and a ZooKeeper node, and asks for the legacy
    framing."""
    version = old.cluster.version
    assert old.cluster.framing == "legacy-length"
    assert old.cluster.zookeeper is not None
    assert old.cluster.zookeeper.running
    assert old.cluster.describe()["framing"] == "legacy-length"
    assert (old.cluster.lib_dir / f"tubemq-server-{version}.jar").exists()
    reply = await old.cluster.web_api.raw("admin_query_server_version")
    assert version.split("-")[0] in str(reply), reply


async def test_producer_and_server_balanced_consumer(old: Old) -> None:
    """Messages sent over TLS with credentials come back through a server-balanced group."""
    topic = TOPICS[0]
    sent = await _produce(old, topic, b"sb")
    got: list[bytes] = []
    attrs: set[str] = set()
    async with Consumer(
        old.master,
        group="g_v12_sb",
        topics=[topic],
        consume_from="earliest",
        heartbeat_interval=2,
        **old.client_kwargs(),  # type: ignore[arg-type]
    ) as consumer:
        async with asyncio.timeout(90):
            while len(got) < N:
                async with await consumer.getmany(timeout=1) as batch:
                    got.extend(m.body for m in batch)
                    attrs.update(m.attributes.get("v", "") for m in batch)
    assert sorted(got) == sorted(sent)
    assert attrs == {"12"}


async def test_client_balanced_consumer(old: Old) -> None:
    """A client-balanced consumer holding every partition reads everything produced."""
    topic = TOPICS[1]
    sent = await _produce(old, topic, b"cb")
    got: list[bytes] = []
    async with ClientBalancedConsumer(
        old.master,
        group="g_v12_cb",
        topics=[topic],
        consume_from="earliest",
        **old.client_kwargs(),  # type: ignore[arg-type]
    ) as consumer:
        parts = await consumer.partitions()
        assert len(parts) == 2, parts
        for meta in parts:
            await consumer.connect(meta.partition_key)
        async with asyncio.timeout(60):
            while len(got) < N:
                async with await consumer.getmany(timeout=1) as batch:
                    got.extend(m.body for m in batch)
    assert sorted(got) == sorted(sent)


async def _cli(old: Old, *args: str, stdin: bytes = b"") -> bytes:
    """``tubemq-aio ARGS`` against ``old`` with its TLS files, user and ``--framing``; stdout."""
    connection = [
        "--master",
        old.master,
        "--framing",
        old.cluster.framing,
        *tls_file_args(old.material),
        "--user",
        USER.user_name,
    ]
    done = await asyncio.to_thread(run_cli, *args, *connection, stdin=stdin, password=USER.password)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


async def test_cli_with_the_framing_flag(old: Old) -> None:
    """``tubemq-aio produce`` and ``consume`` reach a 1.x cluster with ``--framing``."""
    topic = TOPICS[2]
    lines = [f"cli-{i}" for i in range(N)]
    await _cli(old, "produce", "--topic", topic, stdin="\n".join(lines).encode() + b"\n")
    out = await _cli(
        old,
        "consume",
        "--topic",
        topic,
        *shlex.split("--partition all --offset earliest --exit-at-end --timeout 90"),
    )
    bodies = [json.loads(line)["body"] for line in out.decode().splitlines()]
    assert sorted(b for b in bodies if b.startswith("cli-")) == sorted(lines)


async def test_missing_credentials_refused(old: Old) -> None:
    """Authentication on: a producer without credentials is refused by the master."""
    with pytest.raises(AuthenticationError):
        async with Producer(
            old.master,
            topics=[TOPICS[2]],
            framing=old.cluster.framing,
            ssl_context=old.ctx,
            register_attempts=1,
        ) as producer:
            await producer.send(TOPICS[2], b"x", timeout=5)


async def test_standard_framing_gets_the_hint(old: Old) -> None:
    """A client with the standard framing fails with a typed error naming the option."""
    with pytest.raises(TubeMQError, match="legacy-length") as info:
        async with Producer(
            old.master,
            topics=[TOPICS[2]],
            ssl_context=old.ctx,
            credentials=USER,
            rpc_timeout=3,
            register_attempts=1,
        ) as producer:
            await producer.send(TOPICS[2], b"x", timeout=5)
    print(f"\nstandard framing against {old.cluster.version}: {info.value!r}")


async def test_web_listing_at_a_client_port_names_it(old: Old) -> None:
    """``topics --web`` at the 1.x master's and broker's client port: both go silent on the
    bare TubeMQ frame the probe sent, so the listing waited the web API's 10 s and said "timed
    out"; the probe now asks in their framing too and names the port."""
    for address in (old.cluster.master_addr, old.cluster.brokers[0].addr):
        done = await asyncio.to_thread(run_cli, "topics", "--web", address)
        assert done.returncode == 1, done.stderr.decode()
        line = done.stderr.decode()
        assert f"{address} is a TubeMQ client (RPC) port of a 1.1/1.2 server" in line, line
