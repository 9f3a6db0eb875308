"""Broadcast ``client_id`` s are capped per group (issue 24 §6): a new one beyond the cap is a
409 ``too_many_clients`` with nothing stored, the replica forgets scopes it no longer syncs, and
a reset of every client takes a bounded number of Redis round trips."""

from __future__ import annotations

import pytest
from gateway_engine_support import running_service

from tubemq_aio.gateway import consume
from tubemq_aio.gateway.consume import GroupSpec
from tubemq_aio.gateway.errors import TooManyClientsError
from tubemq_aio.gateway.http_errors import api_error_for
from tubemq_aio.gateway.store import clients_keys
from tubemq_aio.testing import FakeCluster, RedisServer


async def test_client_ids_are_capped_pruned_and_reset_in_few_round_trips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consume, "_SYNCED_MAX", 4)
    async with FakeCluster(topics={"t": 2}) as cluster, RedisServer() as redis:
        spec = GroupSpec(name="gcap", topics=("t",), mode="broadcast", max_clients=6)
        async with running_service(
            cluster.master_addr, redis.url, spec, sync_interval=0.1
        ) as service:
            for i in range(6):
                assert (await service.fetch("gcap", client_id=f"c{i}")).status == "empty"
            with pytest.raises(TooManyClientsError) as caught:
                await service.fetch("gcap", client_id="c-extra")
            mapped = api_error_for(caught.value)
            assert mapped is not None
            assert (mapped.status, mapped.code) == (409, "too_many_clients")
            store = service.lease_store()
            assert len(await store.clients("gcap")) == 6  # the refused one left nothing
            assert not await store.client.exists("tgw:{g:gcap}:b:c-extra:parts")
            assert await store.client.scard(clients_keys("gcap")[0]) == 6
            # the six scopes were synced over a sync_interval ago: the next sync forgets them
            service._synced = {k: t - 1.0 for k, t in service._synced.items()}
            assert (await service.fetch("gcap", client_id="c0")).status == "empty"  # known
            assert list(service._synced) == [("gcap", "b:c0")]
            before = store.roundtrips
            entries = await service.reset("gcap", "earliest")
            assert {e.scope for e in entries} == {f"b:c{i}" for i in range(6)}
            assert store.roundtrips - before <= 2  # the client list, then one pipelined reset
            assert service.stats().clients_refused == 1
