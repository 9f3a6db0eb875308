"""from_url: the Go client's keys, and every consumer option written in a URL."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
import pytest

from tubemq_aio import ConfigError, ConsumerConfig, ProducerConfig
from tubemq_aio.auth import Credentials
from tubemq_aio.consumer.bound import BoundConsume


def test_a_go_client_address_reads_as_written() -> None:
    config = ConsumerConfig.from_url(
        "127.0.0.1:8715?topic=t1&filters=a&filters=b&topic=t2&group=g1&consumePosition=-1"
        "&readTimeout=5000&heartbeatInterval=2000&heartbeatMaxRetryTimes=3"
        "&heartbeatAfterFail=30000&msgNotFoundWait=200&rebConfirmWait=1500&maxConfirmWait=9000"
        "&shutdownRebWait=2500&maxSubInfoReportInterval=4&rollbackIfConfirmTimeout=true"
        "&logLevel=info&logPath=x&maxPartCheckPeriod=60000&partCheckSlice=10"
        "&authEnable=true&authUserName=u&authPassword=p%40ss"
    )
    assert [str(m) for m in config.masters] == ["127.0.0.1:8715"]
    assert config.group == "g1"
    assert dict(config.topics) == {"t1": frozenset({"a", "b"}), "t2": frozenset()}
    assert config.consume_from == "earliest"
    assert (config.rpc_timeout, config.heartbeat_interval) == (5.0, 2.0)
    assert (config.heartbeat_max_retries, config.heartbeat_retry_backoff) == (3, 30.0)
    assert (config.msg_not_found_wait, config.rebalance_confirm_wait) == (0.2, 1.5)
    assert (config.confirm_timeout, config.close_rebalance_wait) == (9.0, 2.5)
    assert config.subscription_report_interval == 4
    assert config.credentials == Credentials("u", "p@ss")
    for position, ours in (("0", "latest"), ("1", "latest_always")):
        url = f"tubemq://h:1?group=g1&topic=t&consumePosition={position}"
        assert ConsumerConfig.from_url(url).consume_from == ours


def test_go_bound_consumption_and_ours() -> None:
    go = ConsumerConfig.from_url(
        "h:1?group=g1&topic=t&boundConsume=true&sessionKey=s1&sourceCount=2&selectBig=false"
    )
    assert go.bound == BoundConsume("s1", 2, select_big=False)
    ours = ConsumerConfig.from_url(
        "tubemq://h:1?group=g1&topics=t&bound_session_key=s2&bound_source_count=1"
        "&bound_offsets=1:t:0@280,1:t:1@0"
    )
    assert ours.bound == BoundConsume("s2", 1, offsets={"1:t:0": 280, "1:t:1": 0})
    off = ConsumerConfig.from_url("h:1?group=g1&topic=t&boundConsume=false&sessionKey=s")
    assert off.bound is None


def test_our_topics_filters_and_consume_from() -> None:
    config = ConsumerConfig.from_url(
        "tubemq://h:1?group=g1&topics=t1,t2&filter.t1=a,b&consume_from=latest_always"
    )
    assert dict(config.topics) == {"t1": frozenset({"a", "b"}), "t2": frozenset()}
    assert config.consume_from == "latest_always"
    producer = ProducerConfig.from_url("h:1?topic=t1&topic=t2&readTimeout=4000")
    assert producer.topics == ("t1", "t2")
    assert producer.rpc_timeout == 4.0


def test_tls_files_in_a_url(tmp_path: Path) -> None:
    ca = certifi.where()  # any readable CA bundle
    for key in ("CACertFile", "tls_ca_file"):
        config = ConsumerConfig.from_url(f"tubemq://h:1?group=g1&topic=t&{key}={ca}")
        assert isinstance(config.ssl_context, ssl.SSLContext)
        assert config.ssl_context.verify_mode is ssl.CERT_REQUIRED
    assert ConsumerConfig.from_url("h:1?group=g1&topic=t&tlsEnable=true").ssl_context is not None
    with pytest.raises(ConfigError, match=r"TLS CA file .*none\.pem.* cannot be loaded"):
        ConsumerConfig.from_url(f"tubemq://h:1?group=g1&topic=t&tls_ca_file={tmp_path}/none.pem")


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("group=g1&filters=a", "must follow the topic"),
        ("group=g1&topic=t&consumePosition=2", "consumePosition"),
        ("group=g1&topic=t&readTimeout=soon", "readTimeout"),
        ("group=g1&topic=t&rollbackIfConfirmTimeout=false", "not supported"),
        ("group=g1&topic=t&authEnable=true&authUserName=u", "authPassword"),
        ("group=g1&topic=t&sessionKey=s", "source count"),
        ("group=g1&topic=t&bound_session_key=s&bound_source_count=1&bound_offsets=x", "@offset"),
        ("group=g1&topic=t&filter.other=a", "not subscribed"),
        ("group=g1&topic=t&tlsKeyFile=k.pem", "certificate file"),
    ],
)
def test_bad_url_keys_are_named(query: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        ConsumerConfig.from_url(f"tubemq://h:1?{query}")


def test_consumer_keys_are_unknown_to_a_producer() -> None:
    with pytest.raises(ConfigError, match="unknown option 'group'"):
        ProducerConfig.from_url("h:1?group=g1")
