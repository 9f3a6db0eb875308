"""``TopicNotDeployedError``: one error for a topic the master says is not deployed (431),
raised by the producer and both consumers, and still a ``ServerError`` with code 431."""

from __future__ import annotations

import pickle

import pytest

from tubemq_aio import (
    ServerError,
    TopicNotDeployedError,
    TopicUnavailableError,
    TubeMQError,
)
from tubemq_aio.errors import SERVER_ERROR_CLASSES, BadRequestError, server_error

#: What the real master answers (a Java set of the missing topics inside brackets).
JAVA_TEXT = "Requested topic [[b, c]] not deployed!"


def test_it_is_a_topic_unavailable_error_and_a_server_error_431_under_one_root() -> None:
    exc = TopicNotDeployedError(["a"])
    assert isinstance(exc, TopicUnavailableError)
    assert isinstance(exc, ServerError)
    assert isinstance(exc, TubeMQError)
    assert (exc.err_code, exc.topics) == (431, ("a",))
    assert exc.err_msg == "topic 'a' not deployed"
    assert not exc.retriable
    # one root: every base of every class in the hierarchy is a TubeMQError or above it
    assert all(issubclass(base, TubeMQError) for base in TopicNotDeployedError.__mro__[:-3])


def test_a_single_name_is_one_topic_not_its_letters() -> None:
    assert TopicNotDeployedError("abc").topics == ("abc",)


def test_it_survives_pickling_with_its_topics_and_text() -> None:
    exc = TopicNotDeployedError(("x", "y"), JAVA_TEXT)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is TopicNotDeployedError
    assert (back.topics, back.err_code, back.err_msg, str(back)) == (
        exc.topics,
        431,
        JAVA_TEXT,
        str(exc),
    )


@pytest.mark.parametrize(
    ("text", "asked", "named"),
    [
        (JAVA_TEXT, ("a", "b", "c"), ("b", "c")),  # only those the master lists
        ("Requested topic [[c]] not deployed!", ("a", "c"), ("c",)),
        ("topic b not deployed", ("a", "b"), ("b",)),
        ("something else", ("a", "b"), ("a", "b")),  # names none: all of them
        ("Requested topic [[ab]] not deployed!", ("a", "ab"), ("ab",)),  # whole words only
    ],
)
def test_server_error_431_names_the_topics_the_master_lists(
    text: str, asked: tuple[str, ...], named: tuple[str, ...]
) -> None:
    exc = server_error(431, text, topics=asked)
    assert isinstance(exc, TopicNotDeployedError)
    assert exc.topics == named
    assert exc.err_msg == text


def test_without_topics_431_stays_a_plain_server_error_and_other_codes_are_unchanged() -> None:
    plain = server_error(431, JAVA_TEXT)
    assert type(plain) is ServerError
    assert plain.err_code == 431
    assert type(server_error(400, "bad", topics=("a",))) is BadRequestError
    assert 431 not in SERVER_ERROR_CLASSES
