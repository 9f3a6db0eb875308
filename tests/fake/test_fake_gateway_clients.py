"""Broadcast ``client_id`` s are capped per group and per API key: a new one
beyond a cap is a 409 ``too_many_clients`` with nothing stored, the replica forgets scopes it
no longer syncs, and a reset of every client takes a bounded number of Redis round trips."""

from __future__ import annotations

import pytest

from tests.support.gateway_engine_support import running_service
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.engine import scope_sync
from tubemq_aio.gateway.engine.data import FetchQuery
from tubemq_aio.gateway.errors import TooManyClientsError
from tubemq_aio.gateway.http.api_errors import api_error_for
from tubemq_aio.gateway.leases.redis_keys import clients_keys
from tubemq_aio.testing import FakeCluster, RedisServer


async def test_client_ids_are_capped_pruned_and_reset_in_few_round_trips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scope_sync, "_SYNCED_MAX", 4)
    async with FakeCluster(topics={"t": 2}) as cluster, RedisServer() as redis:
        spec = GroupSpec(
            name="gcap", topics=("t",), mode="broadcast", max_clients=6, max_clients_per_key=4
        )
        async with running_service(
            cluster.master_addr, redis.url, spec, sync_interval=0.1
        ) as service:
            for i in range(6):  # four by one key, then the fifth of that key, two by another
                owner = "k1" if i < 4 else "k2"
                if i == 4:
                    with pytest.raises(TooManyClientsError, match="this API key keeps at most 4"):
                        await service.fetch(FetchQuery("gcap", client_id="c-more", owner="k1"))
                got = await service.fetch(FetchQuery("gcap", client_id=f"c{i}", owner=owner))
                assert got.status == "empty"
            with pytest.raises(TooManyClientsError, match="group keeps at most 6") as caught:
                await service.fetch(FetchQuery("gcap", client_id="c-extra", owner="k3"))
            mapped = api_error_for(caught.value)
            assert mapped is not None
            assert (mapped.status, mapped.code) == (409, "too_many_clients")
            store = service.store
            assert len(await store.clients("gcap")) == 6  # the refused one left nothing
            assert not await store.client.exists("tgw:{g:gcap}:b:c-extra:parts")
            assert await store.client.scard(clients_keys("gcap")[0]) == 6
            # the six scopes were synced over a sync_interval ago: the next sync forgets them
            synced = service._sync._synced
            service._sync._synced = {k: t - 1.0 for k, t in synced.items()}
            monkeypatch.setattr(scope_sync, "_SYNCED_MAX", 1)
            assert (
                await service.fetch(FetchQuery("gcap", client_id="c0"))
            ).status == "empty"  # known
            assert list(service._sync._synced) == [("gcap", "b:c0")]
            before = store.roundtrips
            entries = await service.reset("gcap", "earliest")
            assert {e.scope for e in entries} == {f"b:c{i}" for i in range(6)}
            assert store.roundtrips - before <= 2  # the client list, then one pipelined reset
            assert service.stats().clients_refused == 2
