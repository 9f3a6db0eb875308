"""64-bit integers on the JSON wire: message ids and offsets travel as decimal strings.

A broker's message ids exceed 2⁵³ (e.g. ``1968918481613094912``); JavaScript's ``JSON.parse``
and jq 1.6 read JSON numbers as doubles and silently change such a value. So every id and
offset the gateway answers is a string of decimal digits, and an offset a client sends may be
that string (or, for compatibility, a JSON integer: the offsets the gateway accepts are below
2⁵³ anyway). Millisecond timestamps and small counts stay numbers: they stay below 2⁵³.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from tubemq_aio.gateway.engine.data import MAX_OFFSET

__all__ = ["Int64Text", "OffsetInput", "int_text", "parse_offset_text"]

#: Canonical decimal integers; longer than any offset, so that one too large is refused by the
#: range check after it, which says so, rather than as a spelling.
_CANONICAL = re.compile(r"(?:0|-?[1-9][0-9]{0,29})")
_INT64_PATTERN = r"^(0|-?[1-9][0-9]{0,18})$"

#: A 64-bit integer answered as a decimal string (the OpenAPI type of ids and offsets).
Int64Text = Annotated[
    str,
    Field(
        pattern=_INT64_PATTERN,
        json_schema_extra={"format": "int64", "examples": ["1968918481613094912"]},
    ),
]


def int_text(value: int | None) -> str | None:
    """``value`` as the decimal string the JSON answers carry (``None`` stays ``None``)."""
    return None if value is None else str(value)


def parse_offset_text(value: Any) -> Any:
    """A decimal-string offset as an int; anything else unchanged for the int check after it.

    Only the canonical spelling is taken (no sign, no leading zeros, no spaces, no
    exponent): ``"+5"``, ``"05"`` or ``"5.0"`` are refused rather than guessed at.

    Raises:
        ValueError: ``value`` is a string that is not a canonical decimal integer.
    """
    if isinstance(value, str):
        if not _CANONICAL.fullmatch(value) or value.startswith("-"):
            raise ValueError("an offset must be a string of decimal digits (or an integer)")
        return int(value)
    return value


#: An offset in a request: a decimal string (preferred) or a JSON integer.
OffsetInput = Annotated[
    int,
    BeforeValidator(parse_offset_text),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^(0|[1-9][0-9]{0,15})$", "format": "int64"},
                {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
            ],
            "description": "a decimal string (or an integer, accepted for compatibility)",
        }
    ),
]
