"""``option_args``: the command lines of the test servers are written as option -> value maps."""

from __future__ import annotations

from tubemq_aio.testing._process import option_args


def test_each_option_is_followed_by_its_value_in_the_mapping_order() -> None:
    options = {"--port": "6379", "--save": "", "--bind": "127.0.0.1"}
    assert option_args(options) == ("--port", "6379", "--save", "", "--bind", "127.0.0.1")


def test_no_options_give_no_arguments() -> None:
    assert option_args({}) == ()
