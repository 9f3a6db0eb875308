"""The gateway's packed script calls write the bytes redis-py writes for the same arguments,
and only a single server's plain pool takes that path."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import DataError

from tubemq_aio.gateway.leases.packed_calls import PackedCalls, packed_calls_for
from tubemq_aio.gateway.leases.redis_client import open_redis, parse_redis_url
from tubemq_aio.gateway.leases.redis_keys import script_keys

SHA = "a" * 40
_POOL = aioredis.BlockingConnectionPool.from_url("redis://127.0.0.1:1/0")
_CONNECTION = _POOL.make_connection()  # type: ignore[no-untyped-call]

args_strategy = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.binary(max_size=40),
        st.floats(allow_nan=False),
    ),
    max_size=12,
)


def _redis_py(keys: tuple[bytes, ...], args: list[object]) -> bytes:
    return b"".join(_CONNECTION.pack_command("EVALSHA", SHA, len(keys), *keys, *args))


@given(
    keys=st.lists(st.binary(max_size=30), max_size=10).map(tuple),
    args=args_strategy,
)
def test_the_packed_command_is_the_one_redis_py_packs(
    keys: tuple[bytes, ...], args: list[object]
) -> None:
    packed = PackedCalls(_POOL)
    assert packed.pack(SHA, keys, args) == _redis_py(keys, args)
    # the head kept from the first call serves the next with the same shape
    assert packed.pack(SHA, keys, args) == _redis_py(keys, args)


def test_a_scope_s_keys_and_a_fetch_s_arguments() -> None:
    keys = script_keys("g-é", "b:client-1")
    args = [keys[-1], "1:t:0", "f" * 32, 7, -1, 1 << 40, 0, "", "ack"]
    assert PackedCalls(_POOL).pack(SHA, keys[:-1], args) == _redis_py(keys[:-1], args)


def test_a_bool_is_refused_as_redis_py_refuses_it() -> None:
    with pytest.raises(DataError):
        PackedCalls(_POOL).pack(SHA, (), [True])
    with pytest.raises(DataError):
        _redis_py((), [True])


def test_heads_kept_are_bounded() -> None:
    packed = PackedCalls(_POOL)
    for i in range(5000):
        packed.pack(SHA, (b"k%d" % i,), [])
    assert len(packed._heads) <= 4096


def test_only_a_single_server_on_a_plain_pool_is_packed_by_the_gateway() -> None:
    single = open_redis(parse_redis_url("redis://127.0.0.1:1/0"), max_connections=2, timeout=1)
    assert isinstance(packed_calls_for(single), PackedCalls)
    sentinel = open_redis(
        parse_redis_url("redis+sentinel://127.0.0.1:1/mymaster/0"), max_connections=2, timeout=1
    )
    assert packed_calls_for(sentinel) is None
    cluster = open_redis(
        parse_redis_url("redis+cluster://127.0.0.1:1"), max_connections=2, timeout=1
    )
    assert isinstance(cluster, RedisCluster)
    assert packed_calls_for(cluster) is None
    # a client whose commands retry on their own keeps redis-py's path
    retrying = aioredis.Redis.from_url("redis://127.0.0.1:1/0", retry_on_timeout=True)
    assert packed_calls_for(retrying) is None
    assert isinstance(
        packed_calls_for(aioredis.Redis.from_url("redis://127.0.0.1:1/0")), PackedCalls
    )
