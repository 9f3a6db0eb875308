"""Gateway faults on real processes: replica SIGKILL (holding leases, and between lease and
reply) / SIGSTOP, a client leaving its long poll, Redis kill -9 and flush, broker kill -9. Each
ends with every message delivered (set equality) and no 500 anywhere."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import httpx

from tests.support.gateway_support import (
    ADMIN,
    READER,
    READER_KEY,
    Group,
    Tally,
    consume_until,
    gateways,
    lease_one,
    metric,
    produce_numbered,
    write_config,
)
from tubemq_aio.testing import FaultProxy, LocalCluster, RedisServer, wait_until
from tubemq_aio.testing.gateway import GatewayReplica


async def test_replica_killed_or_frozen_while_holding_leases(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml",
        cluster,
        redis.url,
        [topic],
        [Group("gf", [topic], lease_ms=2000, lease_ms_min=1000)],
    )
    async with gateways(config, 3) as ((a, _b, c), (ca, cb, cc)):
        await produce_numbered(cb, topic, 3000)
        # SIGKILL: leases taken through A are acked through B
        held = [await lease_one(ca, "gf", lease_ms=30000) for _ in range(3)]
        await a.kill()
        for lease in held:
            r = await cb.post(f"/v1/leases/{lease['lease']['token']}/ack", headers=READER)
            assert r.json() == {"result": "acked"}, r.text
        # SIGSTOP past the lease: B re-leases the partition; C's late ack is then refused
        first = await lease_one(cc, "gf", lease_ms=1000)
        c.freeze()
        late_ack = asyncio.create_task(
            cc.post(f"/v1/leases/{first['lease']['token']}/ack", headers=READER)
        )
        await asyncio.sleep(1.5)
        pk = first["lease"]["partition_key"]
        retaken = None
        for _ in range(30):
            got = await lease_one(cb, "gf", lease_ms=30000)
            if got["lease"]["partition_key"] == pk:
                retaken = got
                break
            await cb.post(f"/v1/leases/{got['lease']['token']}/nack", json={}, headers=READER)
        assert retaken is not None
        assert retaken["lease"]["redelivery"] >= 1
        assert [m["value"] for m in retaken["messages"]] == [m["value"] for m in first["messages"]]
        c.thaw()
        r = await asyncio.wait_for(late_ack, 30)
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "lease_stale"
        r = await cb.post(f"/v1/leases/{retaken['lease']['token']}/ack", headers=READER)
        assert r.json() == {"result": "acked"}


async def test_redis_crash_and_flush(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gr", [topic], lease_ms=30000)]
    )
    async with gateways(config, 2) as (_reps, clients):
        a, b = clients
        await produce_numbered(a, topic, 4000)
        first = await lease_one(a, "gr")
        assert (
            await a.post(f"/v1/leases/{first['lease']['token']}/ack", headers=READER)
        ).json() == {"result": "acked"}
        held = await lease_one(a, "gr")
        before = (await a.get("/v1/groups/gr/lag", headers=READER)).json()
        await redis.kill()
        for c in clients:
            r = await c.post("/v1/groups/gr/fetch", json={}, headers=READER)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["retriable"] is True
            assert (await c.get("/readyz")).status_code == 503
        r = await b.post(f"/v1/leases/{held['lease']['token']}/ack", headers=READER)
        assert r.status_code == 503, r.text
        await redis.restart()
        r = await b.post(f"/v1/leases/{held['lease']['token']}/ack", headers=READER)
        assert r.json() == {"result": "acked"}, r.text
        after = (await a.get("/v1/groups/gr/lag", headers=READER)).json()
        committed = {p["partition_key"]: int(p["committed"] or 0) for p in after["partitions"]}
        for p in before["partitions"]:
            assert committed.get(p["partition_key"], 0) >= int(p["committed"] or 0), p
        done = {m["value"] for m in first["messages"] + held["messages"]}
        want = {f"n{i}" for i in range(4000)} - done
        tally = Tally()
        await consume_until(clients, "gr", want, tally, consumers=4, timeout=120)
        assert set(tally.delivered) | done == {f"n{i}" for i in range(4000)}
        # Redis flushed: state lost is reported, never a silent restart from latest
        await redis.flushall()
        for c in clients:
            r = await c.post("/v1/groups/gr/fetch", json={}, headers=READER)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "state_lost"
        r = await a.get("/v1/groups/gr/lag", headers=READER)  # no zero backlog: alerts fire
        assert (r.status_code, r.json()["error"]["code"]) == (503, "state_lost"), r.text
        # a replica (re)started after the loss must not hide it
        async with (
            GatewayReplica(config, init_store=False) as late,
            httpx.AsyncClient(base_url=late.url, timeout=60) as via_late,
        ):
            r = await via_late.post("/v1/groups/gr/fetch", json={}, headers=READER)
            assert (r.status_code, r.json()["error"]["code"]) == (503, "state_lost"), r.text
        for c in clients:
            r = await c.post("/v1/groups/gr/fetch", json={}, headers=READER)
            assert r.status_code == 503, r.text
        r = await b.post("/v1/groups/gr/offsets/reset", json={"to": "earliest"}, headers=ADMIN)
        assert r.status_code == 200, r.text
        again = await lease_one(b, "gr")
        assert again["messages"]


async def test_broker_killed_leases_stay_ackable_and_the_other_broker_flows(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    """Broker kill -9: acks need no broker, the surviving broker's partitions keep flowing, no
    500. (The restart is the next test.)"""
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gk", [topic], lease_ms=60000)]
    )
    async with gateways(config, 2) as (_reps, clients):
        victim, survivor = cluster.brokers[0], cluster.brokers[1]
        stored = await produce_numbered(clients[0], topic, 3000)
        held = await lease_one(clients[0], "gk")
        await victim.kill()
        try:
            token = held["lease"]["token"]
            r = await clients[1].post(f"/v1/leases/{token}/ack", headers=READER)
            assert r.json() == {"result": "acked"}, r.text
            prefix = f"{survivor.broker_id}:"
            want = {v for v, pk in stored.items() if pk.startswith(prefix)}
            want -= {m["value"] for m in held["messages"]}
            assert want
            tally = Tally()
            await consume_until(clients, "gk", want, tally, consumers=4, timeout=120)
            assert set(tally.delivered) >= want
            assert 500 not in tally.statuses
        finally:
            await victim.restart()


async def _rewinds(clients: list[httpx.AsyncClient]) -> int:
    """The replicas' ``offset_rewinds`` engine counters, summed (from ``/metrics``)."""
    return int(sum([await metric(c, "tubemq_gateway_engine_offset_rewinds") for c in clients]))


async def test_broker_restarted_without_its_unflushed_tail_delivers_what_comes_after(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    """Broker kill -9 + restart: the broker comes back without the tail it had not flushed and
    hands those offsets to new messages. The group's committed offsets there are moved back
    (``offset_rewinds``), every message produced after the restart reaches the OLD group, and
    what never arrives is only from the victim's pre-kill tail."""
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gt", [topic], lease_ms=30000)]
    )
    async with gateways(config, 2) as (_reps, clients):
        victim = cluster.brokers[0]
        on_victim = f"{victim.broker_id}:"
        # A: consumed and acked before the kill
        first = await produce_numbered(clients[0], topic, 600, prefix="a")
        tally_a = Tally()
        await consume_until(clients, "gt", set(first), tally_a, consumers=4, timeout=120)
        # B1 produced and consumed, B2 produced, right before the kill: in the broker's
        # memory cache / unflushed tail (on our test cluster the restarted broker even came
        # back at max 0, so A was lost too, but after it had been delivered)
        consumed = await produce_numbered(clients[0], topic, 600, prefix="b")
        tally_b = Tally()
        await consume_until(clients, "gt", set(consumed), tally_b, consumers=4, timeout=120)
        pending = await produce_numbered(clients[0], topic, 300, prefix="p")
        tail = consumed | pending
        tail_victim = {v for v, pk in tail.items() if pk.startswith(on_victim)}
        await victim.kill()
        try:
            before = await _rewinds(clients)
            # While the broker is away the survivor's partitions keep flowing.
            survivor_b = {v for v, pk in tail.items() if not pk.startswith(on_victim)}
            tally_s = Tally()
            await consume_until(
                clients,
                "gt",
                survivor_b - set(tally_b.delivered),
                tally_s,
                consumers=4,
                timeout=120,
            )
            await victim.restart()
            # Fetch until the gateway has re-registered there before producing again: messages
            # that fill the broker past the committed offset first would be skipped (the gap
            # documented in the failure table).
            probe = Tally()
            deadline = asyncio.get_running_loop().time() + 120
            while await _rewinds(clients) == before:
                assert asyncio.get_running_loop().time() < deadline, probe.statuses
                with contextlib.suppress(AssertionError):
                    await consume_until(clients, "gt", {"never"}, probe, consumers=2, timeout=2)
            # C: produced after the restart, reusing the lost offsets: all reach the old group
            after = await produce_numbered(clients[0], topic, 900, prefix="c")
            tally_c = Tally()
            await consume_until(clients, "gt", set(after), tally_c, consumers=4, timeout=180)
            assert await _rewinds(clients) > before
            seen = {
                *tally_a.delivered,
                *tally_b.delivered,
                *tally_s.delivered,
                *probe.delivered,
                *tally_c.delivered,
            }
            lost = (set(first) | set(tail) | set(after)) - seen
            assert lost <= tail_victim, sorted(lost - tail_victim)[:10]
            assert set(first) <= seen
            assert set(after) <= seen
            for t in (tally_a, tally_b, tally_s, probe, tally_c):
                assert 500 not in t.statuses
        finally:
            if not victim.process.running:
                await victim.restart()


def _replica_id(replica: GatewayReplica) -> str:
    """The opaque id of a one-worker replica: answers carry only it, its start-up log maps it
    to the host and process id."""
    found = re.search(
        rf"gateway replica (r-[0-9a-f]+) is \S+:{replica.pid}\b", replica.log_file.read_text()
    )
    assert found is not None, f"no replica id for process {replica.pid} in its log"
    return found.group(1)


async def _held_by(client: httpx.AsyncClient, group: str, replica: str) -> str | None:
    """The partition a lease of the replica with the id ``replica`` holds (lag shows the
    holder)."""
    r = await client.get(f"/v1/groups/{group}/lag", headers=READER)
    assert r.status_code == 200, r.text
    for p in r.json()["partitions"]:
        if p.get("lease_holder") == replica:
            return str(p["partition_key"])
    return None


async def test_replica_killed_between_lease_and_reply(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    """A takes the lease in Redis and answers, but the answer never reaches the client (a proxy
    swallows it) and A is SIGKILLed: the batch comes again through B once the lease expired,
    counted as a redelivery, and every number is delivered and acked."""
    config = write_config(
        tmp_path / "gw.toml",
        cluster,
        redis.url,
        [topic],
        [Group("gl", [topic], lease_ms=2000, lease_ms_min=1000)],
    )
    async with gateways(config, 2) as ((a, _b), (_ca, cb)):
        stored = await produce_numbered(cb, topic, 2000)
        leased_pk: str | None = None
        a_id = _replica_id(a)
        async with (
            FaultProxy(f"127.0.0.1:{a.port}") as proxy,
            httpx.AsyncClient(base_url=f"http://{proxy.addr}", timeout=60) as via_proxy,
        ):
            proxy.set("down", blackhole=True)  # nothing A answers reaches the client
            for _attempt in range(20):
                swallowed = proxy.discarded["down"]
                pending = asyncio.create_task(
                    via_proxy.post("/v1/groups/gl/fetch", json={}, headers=READER)
                )

                async def answered(before: int = swallowed) -> bool:
                    return proxy.discarded["down"] > before

                await wait_until(answered, 30, "replica A answered the fetch")
                leased_pk = await _held_by(cb, "gl", a_id)
                if leased_pk is not None:
                    break
                pending.cancel()  # A answered without a batch (empty, busy, 503): again
                await asyncio.gather(pending, return_exceptions=True)
            assert leased_pk is not None, "replica A never leased a batch"
            await a.kill()
            try:
                await asyncio.wait_for(pending, 30)
                raise AssertionError("the client got an answer through the blackhole")
            except httpx.HTTPError:
                pass  # the connection ended without an answer
        tally = Tally()
        await consume_until([cb], "gl", set(stored), tally, consumers=3, timeout=180)
        assert set(tally.delivered) == set(stored)
        assert 500 not in tally.statuses
        again = [rc for pk, rc in tally.leases if pk == leased_pk]
        assert again, tally.leases
        assert again[0] >= 1  # its first delivery through B is the redelivery of A's batch


async def test_long_poll_ends_when_the_client_disconnects(
    cluster: LocalCluster, topic: str, redis: RedisServer, tmp_path: Path
) -> None:
    """A client closes its connection in the middle of a 30 s long poll: the replica stops
    waiting (no waiter, the request ends as 499) and leases nothing for it, so the next client
    gets the batch at once, not after the 60 s lease."""
    config = write_config(
        tmp_path / "gw.toml", cluster, redis.url, [topic], [Group("gp", [topic], lease_ms=60000)]
    )
    async with gateways(config, 1) as ((a,), (ca,)):
        gone = {"route": "/v1/groups/{group}/fetch", "status": "499"}
        waiters = "tubemq_gateway_engine_long_poll_waiters"
        body = json.dumps({"wait_ms": 30000}).encode()
        _reader, writer = await asyncio.open_connection("127.0.0.1", a.port)
        writer.write(
            b"POST /v1/groups/gp/fetch HTTP/1.1\r\nHost: gw\r\n"
            + f"Authorization: Bearer {READER_KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

        async def polling() -> bool:
            return await metric(ca, waiters) == 1

        await wait_until(polling, 30, "the long poll waits")
        writer.transport.abort()

        async def ended() -> bool:
            return await metric(ca, "tubemq_gateway_http_requests_total", **gone) == 1

        # Only the disconnect path answers 499: without it the poll would end as a 200 after
        # 30 s. The bound leaves room for a loaded machine.
        try:
            await wait_until(ended, 25, "the long poll ended with its client")
        except AssertionError as exc:
            text = (await ca.get("/metrics")).text
            lines = [ln for ln in text.splitlines() if "fetch" in ln and "_total" in ln]
            raise AssertionError(f"{exc}\n{lines}\n{a.log_tail(30)}") from None
        assert await metric(ca, waiters) == 0
        await produce_numbered(ca, topic, 50)
        lag = (await ca.get("/v1/groups/gp/lag", headers=READER)).json()
        assert [p for p in lag["partitions"] if p.get("lease_holder")] == []
        got = await lease_one(ca, "gp", timeout=20)  # far below the 60 s lease
        assert got["lease"]["redelivery"] == 0
        assert got["messages"]
