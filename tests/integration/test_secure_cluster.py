"""Producer and Consumer against a cluster with two-way TLS and client authentication on.

One extra real cluster for the whole module (1 broker, ~40-60 s to start): TLS listeners with
client certificates required (one-way TLS makes the 2.4.0 server exit, see
docs/local-cluster.md) and ``startProduceAuthenticate`` + ``startConsumeAuthenticate``.

What the stock server checks (and so what a client can get wrong): the master refuses a
client whose calls carry no user name and signature (415, ``AuthenticationError``); it does
**not** verify the signature, so a wrong secret is accepted — asserted below so that a server
that starts checking is noticed. TLS mistakes fail the handshake: no client certificate, or a
server certificate the client does not trust, end in ``NetworkError``.

Found here: the stock master issues no ``authAuthorizedToken``, yet brokers with
authentication on refuse a blank one (415); the client therefore sends its broker-style signed
token (``user timestamp nonce signature``). Before that fix every send failed with
``[415] authAuthorizedToken is Blank!``.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cli_run import run_cli
from tests.support.gateway_support import ADMIN, READER, Group, gateways, lease_one, write_config
from tests.support.own_cluster import client_tls_context, start_or_fail, tls_file_args
from tubemq_aio import Credentials, Producer
from tubemq_aio.consumer import Consumer
from tubemq_aio.errors import (
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    NetworkError,
)
from tubemq_aio.gateway import GatewayConfig
from tubemq_aio.testing import (
    AuthSettings,
    LocalCluster,
    RedisServer,
    TlsMaterial,
    make_tls_material,
)

TOPICS = ["sec_a", "sec_b", "sec_c", "sec_gw", "sec_cli"]
USER = Credentials("alice", "s3cret")


class Secure:
    """The secure cluster and what a client needs to reach it."""

    def __init__(self, cluster: LocalCluster, material: TlsMaterial) -> None:
        """Keep ``cluster`` and its TLS ``material``."""
        self.cluster = cluster
        self.material = material
        addr = cluster.master_tls_addr
        assert addr is not None
        self.master = addr

    def context(self, *, client_cert: bool = True, trust: bool = True) -> ssl.SSLContext:
        """A client context: trusts the test CA (or only the system CAs), with the client
        certificate (or without)."""
        return client_tls_context(self.material, client_cert=client_cert, trust=trust)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def secure(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secure]:
    """A 1-broker cluster with two-way TLS and produce/consume authentication."""
    material = await make_tls_material(Path(tmp_path_factory.mktemp("tls")))
    cluster = LocalCluster(
        1,
        topics=TOPICS,
        topic_partitions=2,
        tls=material.settings,
        auth=AuthSettings(produce_authenticate=True, consume_authenticate=True),
    )
    await start_or_fail(cluster, "the secure TubeMQ cluster")
    try:
        yield Secure(cluster, material)
    finally:
        await cluster.stop()


async def test_tls_with_credentials_produces_and_consumes(secure: Secure) -> None:
    """Right certificate and credentials: messages go through TLS to the broker and back."""
    topic = TOPICS[0]
    ctx = secure.context()
    async with Producer(
        secure.master, topics=[topic], ssl_context=ctx, credentials=USER
    ) as producer:
        results = [await producer.send(topic, b"s-%d" % i) for i in range(20)]
    broker_tls_port = secure.cluster.brokers[0].layout.tls_port
    assert {r.partition_key.split(":")[0] for r in results} == {"1"}
    async with Consumer(
        secure.master,
        group="g_sec",
        topics=[topic],
        consume_from="earliest",
        heartbeat_interval=2,
        ssl_context=ctx,
        credentials=USER,
    ) as consumer:
        got: list[bytes] = []
        async with asyncio.timeout(60):
            while len(got) < 20:
                async with await consumer.getmany(timeout=0.5) as batch:
                    got.extend(m.body for m in batch)
        pool = consumer._pool
        assert pool is not None
        peers = list(pool.connections)
    assert sorted(got) == sorted(b"s-%d" % i for i in range(20))
    # Every link is TLS; the broker was reached on its TLS port (from the master's records).
    assert peers
    assert all(a.tls for a in peers), peers
    assert broker_tls_port in {a.port for a in peers}, (peers, broker_tls_port)


async def test_missing_credentials_are_refused_and_secrets_not_checked(secure: Secure) -> None:
    """No credentials: the master refuses producer and consumer with 415. A wrong secret is
    accepted: the stock server checks only that user, signature and a fresh timestamp are
    present (its authentication hook is empty)."""
    topic = TOPICS[1]
    ctx = secure.context()
    producer = Producer(secure.master, topics=[topic], ssl_context=ctx, register_attempts=1)
    with pytest.raises(AuthenticationError) as info:
        await producer.start()
    assert info.value.err_code == 415
    await producer.close()
    consumer = Consumer(
        secure.master, group="g_noauth", topics=[topic], ssl_context=ctx, register_attempts=1
    )
    with pytest.raises(AuthenticationError) as cinfo:
        await consumer.start()
    assert cinfo.value.err_code == 415
    await consumer.close()
    print(f"\nno credentials: producer {info.value!r}; consumer {cinfo.value!r}")

    wrong = Credentials(USER.user_name, "not-the-secret-" + uuid.uuid4().hex)
    async with Producer(secure.master, topics=[topic], ssl_context=ctx, credentials=wrong) as p:
        await p.send(topic, b"wrong-secret")
    async with Consumer(
        secure.master,
        group="g_wrong",
        topics=[topic],
        consume_from="earliest",
        heartbeat_interval=2,
        ssl_context=ctx,
        credentials=wrong,
    ) as c:
        batch = await c.getmany(timeout=30)
        assert [m.body for m in batch] == [b"wrong-secret"]
        await batch.ack()


async def test_tls_mistakes_fail_the_handshake(secure: Secure) -> None:
    """Two-way TLS without a client certificate: the server rejects it after the handshake, so
    the first request's link is lost (``ConnectionLostError``). Not trusting the server's
    certificate: ``ConnectError``. Both are ``NetworkError``s naming the master's TLS address,
    for producer and consumer alike."""
    topic = TOPICS[2]
    cases: list[tuple[ssl.SSLContext, type[NetworkError]]] = [
        (secure.context(client_cert=False), ConnectionLostError),
        (secure.context(trust=False), ConnectError),
    ]
    for ctx, error in cases:
        producer = Producer(
            secure.master, topics=[topic], ssl_context=ctx, credentials=USER, register_attempts=1
        )
        with pytest.raises(error) as info:
            await producer.start()
        await producer.close()
        consumer = Consumer(
            secure.master,
            group="g_tls",
            topics=[topic],
            ssl_context=ctx,
            credentials=USER,
            register_attempts=1,
        )
        with pytest.raises(error) as cinfo:
            await consumer.start()
        await consumer.close()
        print(f"\n{info.value!r}\n{cinfo.value!r}")
        assert f"{secure.master}/tls" in str(info.value)
        assert f"{secure.master}/tls" in str(cinfo.value)


async def test_gateway_produces_and_consumes_through_tls_and_credentials(
    secure: Secure, redis: RedisServer, tmp_path: Path
) -> None:
    """A gateway replica whose masters are a ``tubemqs://user:password@`` URL and whose
    ``[tubemq]`` table names the CA and the client certificate: HTTP produce, fetch and ack
    reach the broker through two-way TLS with authentication, and the password shows
    neither in the replica's log nor in a repr of its config."""
    topic = TOPICS[3]
    material = secure.material
    assert material.client_key is not None, "openssl is needed for a client key"
    tls = (
        f'[tubemq]\ntls_ca_file = "{material.ca_pem}"\n'
        f'tls_cert_file = "{material.client_cert}"\ntls_key_file = "{material.client_key}"'
    )
    url = f"tubemqs://{USER.user_name}:{USER.password}@{secure.master}"
    config = write_config(
        tmp_path / "gw.toml",
        secure.cluster,
        redis.url,
        [topic],
        [Group("g_secgw", [topic])],
        extra=tls,
        masters=url,
    )
    loaded = GatewayConfig.from_toml(config)
    assert loaded.masters == secure.master
    assert USER.password not in repr(loaded)
    async with gateways(config, 1) as (reps, (client,)):
        values = [f"sec-{i}" for i in range(10)]
        for value in values[:5]:
            r = await client.post(
                f"/v1/topics/{topic}/messages", json={"value": value}, headers=ADMIN
            )
            assert r.status_code == 200, r.text
        rest = {"messages": [{"value": v} for v in values[5:]]}
        r = await client.post(f"/v1/topics/{topic}/messages/batch", json=rest, headers=ADMIN)
        assert r.status_code == 200, r.text
        got: list[str] = []
        async with asyncio.timeout(60):
            while len(got) < len(values):
                reply = await lease_one(client, "g_secgw")
                got += [m["value"] for m in reply["messages"]]
                ack = await client.post(f"/v1/leases/{reply['lease']['token']}/ack", headers=READER)
                assert ack.json() == {"result": "acked"}, ack.text
        assert (await client.get("/readyz")).status_code == 200
        log = reps[0].log_file.read_text()
    assert sorted(got) == sorted(values)
    assert USER.password not in log


async def test_cli_speaks_tls_and_authentication(secure: Secure) -> None:
    """``tubemq-aio`` with ``--tls-ca/--tls-cert/--tls-key``: ``--user`` with the password from
    ``$TUBEMQ_AIO_PASSWORD`` produces, a ``tubemqs://user:pass@`` URL consumes; without
    ``--user`` the master refuses (exit 1). The password is never printed."""
    topic = TOPICS[4]
    tls = tls_file_args(secure.material)

    def run(*args: str, password: str | None = None, stdin: bytes = b"") -> tuple[int, str, str]:
        done = run_cli(*args, stdin=stdin, password=password)
        out, err = done.stdout.decode(), done.stderr.decode()
        assert USER.password not in out + err
        return done.returncode, out, err

    lines = b"".join(b"tls-%d\n" % i for i in range(5))
    code, _, err = await asyncio.to_thread(
        run,
        "produce",
        "--master",
        secure.master,
        "--topic",
        topic,
        *tls,
        "--user",
        USER.user_name,
        password=USER.password,
        stdin=lines,
    )
    assert code == 0, err
    assert f"sent 5 messages to {topic}, 0 failed" in err

    code, _, err = await asyncio.to_thread(
        run, "produce", "--master", secure.master, "--topic", topic, *tls, stdin=b"x\n"
    )
    assert code == 1
    assert "AuthenticationError" in err

    url = f"tubemqs://{USER.user_name}:{USER.password}@{secure.master}"
    code, out, err = await asyncio.to_thread(
        run,
        "consume",
        "--master",
        url,
        *shlex.split(f"--topic {topic} --group g_cli_tls"),
        *tls,
        *shlex.split("--from earliest --count 5 --timeout 90"),
    )
    assert code == 0, err
    assert sorted(json.loads(line)["body"] for line in out.splitlines()) == [
        f"tls-{i}" for i in range(5)
    ]
