"""The typed keyword options (``Unpack[...]`` of the constructors and ``from_url``) name exactly
the configuration fields, with types the checker can resolve: a field added to a config without
its option (or the reverse) fails here."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from tubemq_aio import ClientBalancedConsumer, ConfigError, Consumer, Producer
from tubemq_aio.config import ClientConfig, ClientOptions
from tubemq_aio.consumer.client_balanced import ClientBalancedUrlOptions
from tubemq_aio.consumer.config import (
    ConsumerConfig,
    ConsumerFields,
    ConsumerOptions,
    ConsumerUrlOptions,
)
from tubemq_aio.producer.config import ProducerConfig, ProducerOptions, SendOptions


def _fields(config: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config)}


def _keys(options: type) -> set[str]:
    return set(typing.get_type_hints(options))  # resolves every annotation


@pytest.mark.parametrize(
    ("options", "config", "explicit"),
    [
        (ClientOptions, ClientConfig, {"masters"}),
        (ProducerOptions, ProducerConfig, {"masters"}),
        (ConsumerOptions, ConsumerConfig, {"masters", "group", "topics", "consume_from"}),
        (ConsumerFields, ConsumerConfig, {"masters"}),
    ],
)
def test_options_are_the_config_fields(options: type, config: type, explicit: set[str]) -> None:
    assert _keys(options) == _fields(config) - explicit
    assert not options.__required_keys__  # type: ignore[attr-defined]


def test_consumer_keywords_add_the_constructor_arguments() -> None:
    callbacks = {"on_assigned", "on_revoked"}
    assert _keys(ConsumerUrlOptions) == _keys(ConsumerFields) | callbacks
    params = inspect.signature(Consumer).parameters
    assert callbacks <= set(params)
    balanced_only = _keys(ClientBalancedUrlOptions) - _keys(ConsumerUrlOptions)
    assert balanced_only == {"source_count", "node_id", "reassign_interval", "assignor"}
    assert balanced_only <= set(inspect.signature(ClientBalancedConsumer).parameters)


def test_typed_keywords_are_still_validated_at_run_time() -> None:
    options: dict[str, object] = {"fetchers": "two"}
    with pytest.raises(ConfigError, match="fetchers"):
        Consumer("127.0.0.1:1", group="g", topics=["t"], **options)  # type: ignore[arg-type]


def test_send_options_are_the_keyword_arguments_of_send() -> None:
    """``send_nowait(**options)`` takes what ``send`` spells out, with the same types."""
    send = inspect.signature(Producer.send)
    keyword_only = {
        name: typing.get_type_hints(Producer.send)[name]
        for name, p in send.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert typing.get_type_hints(SendOptions) == keyword_only
