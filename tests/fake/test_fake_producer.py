"""Producer against FakeCluster: send, error-code mapping, retries, timeouts, re-registration."""

from __future__ import annotations

import asyncio

import pytest

from tubemq_aio import Producer, RemoteRpcError, SendOutcomeUnknownError, ServerError
from tubemq_aio.errors import RequestTimeoutError
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing import FakeCluster, Fault, wait_until

SEND = Method.BROKER_PRODUCER_SEND_MESSAGE


async def test_sends_are_stored_in_order_with_index_offsets() -> None:
    async with FakeCluster(topics={"demo": 2}, brokers=2) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            results = [await producer.send("demo", f"m{i}".encode()) for i in range(40)]
        assert cluster.bodies("demo") == [f"m{i}".encode() for i in range(40)]
        # Four partitions in all, two per broker in one store each: the partitions of a store
        # share its index, so each broker's offsets advance by one 28-byte index record per
        # message, whichever partition it went to (as on a real broker).
        by_key: dict[str, list[int]] = {}
        by_store: dict[str, list[int]] = {}
        for r in results:
            by_key.setdefault(r.partition_key, []).append(r.append_offset)
            by_store.setdefault(r.partition_key.split(":")[0], []).append(r.append_offset)
        assert len(by_key) == 4
        assert len(by_store) == 2
        for offsets in by_store.values():
            assert offsets == [28 * i for i in range(len(offsets))]


@pytest.mark.parametrize(
    ("code", "name"),
    [(400, "BadRequestError"), (403, "ForbiddenError"), (500, "InternalServerError")],
)
async def test_broker_refusal_maps_to_typed_server_error(code: int, name: str) -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.error(code, "refused"))
        with pytest.raises(ServerError) as info:
            await producer.send("demo", b"x")
        assert info.value.err_code == code
        assert type(info.value).__name__ == name
        assert cluster.requests(SEND) == 1  # not retried: the broker said no
        assert cluster.message_count("demo") == 0


@pytest.mark.parametrize("code", [503, 419])
async def test_not_stored_answers_are_retried(code: int) -> None:
    async with FakeCluster(topics={"demo": 1}, brokers=2) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            cluster.inject(SEND, Fault.error(code))
            result = await producer.send("demo", b"x")
        assert cluster.requests(SEND) == 2
        assert cluster.bodies("demo") == [b"x"]
        assert result.message_id == cluster.messages("demo")[0].message_id


async def test_no_answer_ends_at_the_deadline_as_outcome_unknown() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.no_answer())
        with pytest.raises(SendOutcomeUnknownError):
            await asyncio.wait_for(producer.send("demo", b"x", timeout=0.3), 5)
        assert (await producer.send("demo", b"y")).message_id > 0


async def test_reset_mid_send_is_outcome_unknown_and_the_next_send_reconnects() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            cluster.inject(SEND, Fault.reset())
            with pytest.raises(SendOutcomeUnknownError):
                await producer.send("demo", b"x", timeout=10)
            await producer.send("demo", b"y", timeout=10)
        assert cluster.bodies("demo") == [b"y"]


async def test_exception_frame_is_a_remote_rpc_error() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        cluster.inject(SEND, Fault.exception("java.lang.NullPointerException", "boom"))
        with pytest.raises(RemoteRpcError, match="NullPointerException"):
            await producer.send("demo", b"x")


async def test_delayed_answer_within_the_deadline_succeeds() -> None:
    async with (
        FakeCluster(topics={"demo": 1}) as cluster,
        Producer(cluster.master_addr, topics=["demo"]) as producer,
    ):
        rule = cluster.inject(SEND, Fault.delay(0.2))
        assert (await producer.send("demo", b"x", timeout=10)).message_id > 0
        assert rule.hits == 1


async def test_register_refused_fails_start_with_the_code() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(Method.MASTER_PRODUCER_REGISTER, Fault.error(500), times=None)
        producer = Producer(cluster.master_addr, register_attempts=1)
        with pytest.raises(ServerError) as info:
            await producer.start()
        assert info.value.err_code == 500
        await producer.close()


async def test_silent_master_fails_start_with_a_timeout() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        cluster.inject(Method.MASTER_PRODUCER_REGISTER, Fault.no_answer(), times=None)
        producer = Producer(cluster.master_addr, register_attempts=1, rpc_timeout=3)
        with pytest.raises(RequestTimeoutError):
            await asyncio.wait_for(producer.start(), 10)
        await producer.close()


async def test_heartbeat_411_makes_the_producer_register_again() -> None:
    async with FakeCluster(topics={"demo": 1}) as cluster:
        async with Producer(cluster.master_addr, topics=["demo"], heartbeat_interval=1) as producer:
            assert cluster.requests(Method.MASTER_PRODUCER_REGISTER) == 1
            cluster.master.producers.clear()  # the master forgot us (e.g. it restarted)

            registers = Method.MASTER_PRODUCER_REGISTER
            await wait_until(lambda: cluster.requests(registers) >= 2, 10, "a new register")
            await producer.send("demo", b"after")
        assert cluster.bodies("demo") == [b"after"]
