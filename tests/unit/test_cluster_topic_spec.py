"""``tubemq-aio cluster up --topic NAME[:PARTITIONS]``: the names the real master's web API
takes (``^[a-zA-Z]\\w+$``, at most 64 characters, ``WebFieldDef.TOPICNAME``), for the fake as
for the real cluster, so that nothing tried on the fake fails on the real one."""

from __future__ import annotations

import argparse

import pytest

from tubemq_aio.testing._fake_process import parse_topic


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("demo", ("demo", 3)),
        ("demo:1", ("demo", 1)),
        ("a_1:1000", ("a_1", 1000)),
        ("x" * 64, ("x" * 64, 3)),
    ],
)
def test_names_the_master_takes(spec: str, expected: tuple[str, int]) -> None:
    assert parse_topic(spec) == expected


@pytest.mark.parametrize(
    "spec",
    # the fake served all of these; the real master refuses each name
    ["\u2603:3", "a,b:3", "t", "1abc", "de-mo", "de mo", "d\u00e9mo", "x" * 65, "demo:0", ":3"],
)
def test_names_the_master_refuses_are_usage_errors(spec: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_topic(spec)
