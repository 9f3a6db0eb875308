"""LocalCluster refuses, when it is built, arguments it could not honour (a user's attack on
the testing tools): each was taken, and failed tens of seconds into the start (a topic
string created one topic per letter, which the master refuses; a port of 70000 failed the
JVM's bind) or never failed at all (a NaN start_timeout gave up at once)."""

from __future__ import annotations

from typing import Any

import pytest

from tubemq_aio.testing import LocalCluster


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"brokers": "2"}, "brokers"),  # a raw TypeError from a comparison
        ({"brokers": True}, "brokers"),
        ({"brokers": 2.0}, "brokers"),
        ({"topic_partitions": 0}, "topic_partitions"),
        ({"topic_partitions": "3"}, "topic_partitions"),
        ({"topics": ["a"]}, "topics"),  # the master takes 2 to 64 characters
        ({"topics": ["my topic"]}, "topics"),
        ({"topics": [3]}, "topics"),
        ({"start_timeout": float("nan")}, "start_timeout"),
        ({"start_timeout": -1}, "start_timeout"),
        ({"ready_timeout": "5"}, "ready_timeout"),
        ({"master_port": 70000}, "master_port"),
        ({"master_web_port": -1}, "master_web_port"),
        ({"master_port": "8715"}, "master_port"),
    ],
    ids=repr,
)
def test_bad_arguments_are_refused_by_name_before_any_jvm(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        LocalCluster(**options)


def test_a_topic_string_names_topics_not_letters() -> None:
    cluster = LocalCluster(topics="orders, audit")
    assert cluster._initial_topics == ["orders", "audit"]
