"""The one seam where response bytes become protobuf messages (docs/protocol/wire.md §3).

Two ways malformed input gets past ``FromString`` alone: bytes that do not parse (a
``DecodeError``) and ``string`` fields that are not UTF-8. Our messages are proto2, whose
runtime does not validate UTF-8 on parse and hands such a field back as ``bytes`` instead of
``str``; code that reads it then fails with a ``TypeError`` far from the wire. Here both become a
:class:`~tubemq_aio.errors.RemoteProtocolError` at once. The walk over string fields is planned
once per message type and skips sub-messages without strings (e.g. the messages of a fetch).
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from tubemq_aio.errors import RemoteProtocolError

__all__ = ["parse_message"]

_M = TypeVar("_M", bound=Message)

# Descriptors are typed loosely: the pure-Python and upb runtimes have different classes.
_Descriptor = Any
# (field name, repeated, None for a string field | the sub-message's descriptor)
_Plan = tuple[tuple[str, bool, _Descriptor | None], ...]
_PLANS: dict[_Descriptor, _Plan] = {}


def parse_message(cls: type[_M], data: bytes) -> _M:
    """Decode ``data`` as ``cls``; every ``string`` field in it must be valid UTF-8.

    Raises:
        RemoteProtocolError: the bytes are not a valid message of this type.
    """
    try:
        msg = cls.FromString(data)
    except DecodeError as exc:
        raise RemoteProtocolError(f"undecodable {cls.__name__}: {exc}") from None
    except (ValueError, TypeError, RuntimeError) as exc:  # defensive: runtimes differ
        raise RemoteProtocolError(f"undecodable {cls.__name__}: {exc}") from None
    bad = _first_non_text(msg, msg.DESCRIPTOR)
    if bad is not None:
        raise RemoteProtocolError(f"{cls.__name__}.{bad} is not valid UTF-8")
    return msg


def _plan(descriptor: _Descriptor, visiting: frozenset[_Descriptor] = frozenset()) -> _Plan:
    plan = _PLANS.get(descriptor)
    if plan is not None:
        return plan
    steps: list[tuple[str, bool, _Descriptor | None]] = []
    for field in descriptor.fields:
        repeated = bool(field.is_repeated)
        if field.type == FieldDescriptor.TYPE_STRING:
            steps.append((field.name, repeated, None))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            sub = field.message_type
            if sub in visiting or _plan(sub, visiting | {descriptor}):
                steps.append((field.name, repeated, sub))
    plan = tuple(steps)
    _PLANS[descriptor] = plan
    return plan


def _first_non_text(msg: Message, descriptor: _Descriptor) -> str | None:
    """The name of the first string field holding non-UTF-8 bytes, or None."""
    for name, repeated, sub in _plan(descriptor):
        value = getattr(msg, name)
        if sub is None:
            if repeated:
                if any(type(v) is not str for v in value):
                    return name
            elif type(value) is not str:
                return name
        elif repeated:
            for item in value:
                bad = _first_non_text(item, sub)
                if bad is not None:
                    return f"{name}.{bad}"
        elif msg.HasField(name):
            bad = _first_non_text(value, sub)
            if bad is not None:
                return f"{name}.{bad}"
    return None
