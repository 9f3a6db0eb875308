"""A group's ``msg_time_zone``: the gateway's offsets reset ``to_time`` reads the producers'
``msg_time`` stamps in that zone (on the FakeCluster and a real redis-server; the real-cluster
twin without a zone is tests/integration/test_time_cluster.py)."""

from __future__ import annotations

from tests.support.gateway_engine_support import running_service
from tests.support.time_bursts import produce_bursts
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.testing import FakeCluster, RedisServer


async def test_reset_to_time_reads_the_stamps_in_the_group_zone(redis_server: RedisServer) -> None:
    specs = [
        GroupSpec(name="g-utc", topics=("demo",)),
        GroupSpec(name="g-east", topics=("demo",), msg_time_zone="Asia/Shanghai"),
        GroupSpec(name="g-west", topics=("demo",), msg_time_zone="America/Bogota"),
    ]
    async with FakeCluster(topics={"demo": 2}) as cluster:
        bursts = await produce_bursts(cluster.master_addr, "demo")  # stamped in UTC wall time
        async with running_service(cluster.master_addr, redis_server.url, *specs) as service:
            moved: dict[str, dict[str, int]] = {}
            for spec in specs:
                entries = await service.reset(spec.name, bursts.pauses[0])
                moved[spec.name] = {e.partition_key: int(e.new) for e in entries}
    # UTC: the first message of the second burst; read as UTC+8 every stamp is earlier than
    # the time (each partition's end); read as UTC-5 every stamp is later (each one's start)
    assert moved["g-utc"] != moved["g-east"]
    assert moved["g-utc"] != moved["g-west"]
    assert all(
        moved["g-west"][k] <= moved["g-utc"][k] <= moved["g-east"][k] for k in moved["g-utc"]
    )
    assert all(v == 0 for v in moved["g-west"].values())
