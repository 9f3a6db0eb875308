"""The Spark source's ``msgTimeZone``: the driver's time search reads the producers' ``msg_time``
stamps in that zone. Runs the source's own planning code (no Spark session) on FakeCluster."""

from __future__ import annotations

from tests.support.time_bursts import produce_bursts, read_to_end
from tubemq_aio import ClientBalancedConsumer
from tubemq_aio.spark._options import parse_source_options
from tubemq_aio.spark._planner import consumer_kwargs, time_offsets
from tubemq_aio.testing import FakeCluster


async def _later(master: str, zone: str | None, start_ms: int) -> list[bytes]:
    """What a source started at ``start_ms`` (epoch ms) reads, with ``msgTimeZone`` = zone."""
    options = {"master": master, "topic": "demo", "startingTimestamp": str(start_ms)}
    if zone is not None:
        options["msgTimeZone"] = zone
    parsed = parse_source_options(options, streaming=False)
    async with ClientBalancedConsumer(
        **consumer_kwargs(parsed, parsed.planner_group, ["demo"])
    ) as planner:
        starts = await time_offsets(planner, parsed.starting_times)
    got: list[bytes] = []
    async with ClientBalancedConsumer(**consumer_kwargs(parsed, "reader", ["demo"])) as reader:
        for key, offset in starts.items():
            got.extend(await read_to_end(reader, key, offset))
    return got


async def test_the_time_search_reads_the_stamps_in_msg_time_zone() -> None:
    async with FakeCluster(topics={"demo": 2}) as cluster:
        bursts = await produce_bursts(cluster.master_addr, "demo")  # stamped in UTC wall time
        start_ms = int(bursts.pauses[0].timestamp() * 1000)
        expected = sorted(bursts.later(0))
        assert sorted(await _later(cluster.master_addr, None, start_ms)) == expected
        assert sorted(await _later(cluster.master_addr, "UTC", start_ms)) == expected
        # Read as UTC+8 wall times, every stamp lies eight hours before the start: nothing later.
        assert await _later(cluster.master_addr, "Asia/Shanghai", start_ms) == []
        # Read as UTC-5, every stamp lies five hours after it: every burst is later.
        everything = sorted(bursts.later(-1))
        assert sorted(await _later(cluster.master_addr, "America/Bogota", start_ms)) == everything
