"""Ids and offsets on the JSON wire (pure: no app, no event loop)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from tubemq_aio.gateway.http.schemas import ResetRequest
from tubemq_aio.gateway.http.wire_ints import int_text, parse_offset_text

BROKER_ID = 1968918481613094913  # over 2**53, as a broker's message ids are


def test_int_text_keeps_every_digit() -> None:
    assert int_text(BROKER_ID) == "1968918481613094913"
    assert int(int_text(2**63 - 1) or "") == 2**63 - 1
    assert int_text(-1) == "-1"
    assert int_text(None) is None
    assert float(BROKER_ID) != BROKER_ID  # what a double does to it


@pytest.mark.parametrize("text", ["0", "7", "9007199254740991", "1968918481613094913"])
def test_canonical_decimal_strings_are_offsets(text: str) -> None:
    assert parse_offset_text(text) == int(text)


@pytest.mark.parametrize(
    "text", ["", " 1", "1 ", "+1", "-1", "-0", "01", "1.0", "1e3", "0x1", "１", "1_000", "1" * 31]
)
def test_other_spellings_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="decimal digits"):
        parse_offset_text(text)


def test_a_number_too_large_is_refused_by_the_range_check_which_says_so() -> None:
    """20 digits were refused as a spelling ("must be a string of decimal digits"), which they
    are; the range check after the parse names the limit."""
    assert parse_offset_text("1" * 20) == int("1" * 20)
    with pytest.raises(ValidationError, match="less than or equal to 9007199254740991"):
        TypeAdapter(ResetRequest).validate_python({"to": {"1:t:0": "1" * 20}})


def test_non_strings_pass_through_to_the_strict_int_check() -> None:
    assert parse_offset_text(5) == 5
    adapter = TypeAdapter(ResetRequest)
    assert adapter.validate_python({"to": {"1:t:0": "5"}}).to == {"1:t:0": 5}
    assert adapter.validate_python({"to": {"1:t:0": 5}}).to == {"1:t:0": 5}
    for bad in (True, 5.0, None, [5]):
        with pytest.raises(ValidationError):
            adapter.validate_python({"to": {"1:t:0": bad}})
