"""Every harness service holds its ports' reservations while it lives and releases them on stop.

Redis runs for real (one server; the Sentinel and Cluster sets under the ``failover`` marker,
which ``make unit`` leaves out); the services that need Java, Spark or a gateway store are
checked without starting them: their stop releases what they reserved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tubemq_aio.testing import LocalCluster, RedisClusterSet, RedisSentinelSet, RedisServer
from tubemq_aio.testing._ports import reserved_ports
from tubemq_aio.testing.gateway import GatewayReplica
from tubemq_aio.testing.spark_cluster import SparkConnectServer, SparkStandaloneCluster


async def test_a_redis_server_holds_its_port_across_restarts_until_stop(tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path / "redis")
    async with server:
        port = server.port
        assert port in reserved_ports()
        await server.kill()
        assert port in reserved_ports()  # a crashed server keeps its port for the restart
        await server.restart()
        assert server.port == port
        assert port in reserved_ports()
    assert port not in reserved_ports()
    await server.start()  # started again after stop: the same port, reserved again
    try:
        assert server.port == port
        assert port in reserved_ports()
    finally:
        await server.stop()
    assert port not in reserved_ports()


@pytest.mark.failover
async def test_the_redis_sets_release_every_port_on_stop() -> None:
    async with RedisSentinelSet() as sentinels:
        ports = {*sentinels.sentinel_ports, *(s.port for s in sentinels.servers)}
        assert len(ports) == 5
        assert reserved_ports() >= ports
    assert not reserved_ports() & ports
    async with RedisClusterSet() as cluster:
        ports = {s.port for s in cluster.servers} | set(cluster._lease.ports)
        assert len(ports) == 12  # six nodes and their cluster bus ports
        assert reserved_ports() >= ports
    assert not reserved_ports() & ports


async def test_a_gateway_replica_reserves_its_port_from_construction_to_stop(
    tmp_path: Path,
) -> None:
    replica = GatewayReplica(tmp_path / "gateway.toml", log_file=tmp_path / "gw.log")
    assert replica.port in reserved_ports()
    await replica.stop()
    assert replica.port not in reserved_ports()


async def test_spark_and_the_tubemq_cluster_release_their_leases_on_stop(tmp_path: Path) -> None:
    services: list[SparkStandaloneCluster | SparkConnectServer | LocalCluster] = [
        SparkStandaloneCluster(work_dir=tmp_path / "spark"),
        SparkConnectServer(work_dir=tmp_path / "connect"),
        LocalCluster(work_dir=tmp_path / "tubemq"),
    ]
    for service in services:
        ports = set(service._lease.take(2))  # what their start takes first
        assert reserved_ports() >= ports
        await service.stop()
        assert not reserved_ports() & ports, service
