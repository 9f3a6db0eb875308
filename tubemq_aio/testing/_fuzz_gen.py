"""Input generators of the fuzz driver: structure-aware protobuf bytes, then blind mutations.

Purely random bytes rarely get past a protobuf parser, so most inputs are built from a message
descriptor: every field present or not, values drawn from edge cases (``-2``, ``2**31-1``...),
strings made of the separators TubeMQ metadata uses (``# : @ , =``) and, at the wire level, bytes
that are not UTF-8. A share of the inputs is then mutated (bit flips, truncation, splices).
"""

from __future__ import annotations

import random
from typing import Any

from tubemq_aio.protocol.wire import encode_varint

__all__ = ["message_bytes", "mutate", "text_bytes"]

_EDGE_INTS = (0, 1, -1, -2, 127, 128, 200, 404, 411, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63))
_TOKENS = (
    *("0", "1", "-1", "-2", "28", "9999999999999999999"),
    *("topic", "demo", "127.0.0.1", "8123", " ", "", "g", "OK!", "consumer@group"),
    *("{", "}", "[", "]", '"', "null", "\u00e9", "\ufffd"),
)
_SEPARATORS = ("#", ":", "@", ",", "=", "-", "_", " ", ";", "\n")
_INVALID_UTF8 = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80")
_WIRE_VARINT = 0
_WIRE_LEN = 2
_TYPE_BOOL = 8
_TYPE_STRING = 9
_TYPE_MESSAGE = 11
_TYPE_BYTES = 12


def text_bytes(rng: random.Random) -> bytes:
    """A metadata-looking string: tokens and separators, sometimes with invalid UTF-8 inside."""
    parts = [
        rng.choice(_TOKENS) if rng.random() < 0.6 else rng.choice(_SEPARATORS)
        for _ in range(rng.randrange(0, 12))
    ]
    data = "".join(parts).encode()
    if rng.random() < 0.15:
        cut = rng.randrange(len(data) + 1)
        data = data[:cut] + rng.choice(_INVALID_UTF8) + data[cut:]
    if rng.random() < 0.05:
        data = rng.randbytes(rng.randrange(0, 40))
    return data


def _int_value(rng: random.Random) -> int:
    if rng.random() < 0.6:
        return rng.choice(_EDGE_INTS)
    return rng.randrange(-(2**40), 2**40)


def _field_value(rng: random.Random, fd: Any, depth: int) -> tuple[int, int | bytes]:
    """``(wire type, value)`` for one occurrence of field ``fd``."""
    if fd.type == _TYPE_MESSAGE:
        if depth > 3:
            return _WIRE_LEN, b""
        return _WIRE_LEN, message_bytes(rng, fd.message_type, depth + 1)
    if fd.type in (_TYPE_STRING, _TYPE_BYTES):
        if fd.type == _TYPE_BYTES and rng.random() < 0.3:
            return _WIRE_LEN, rng.randbytes(rng.randrange(0, 64))
        return _WIRE_LEN, text_bytes(rng)
    if fd.type == _TYPE_BOOL:
        return _WIRE_VARINT, rng.choice((0, 1, 1, 2))
    if rng.random() < 0.03:  # a wrong wire type for this field
        return _WIRE_LEN, text_bytes(rng)
    return _WIRE_VARINT, _int_value(rng)


def message_bytes(rng: random.Random, descriptor: Any, depth: int = 0) -> bytes:
    """Serialize a random instance of the message ``descriptor`` by hand, at the wire level."""
    out = bytearray()
    fields = list(descriptor.fields)
    rng.shuffle(fields) if rng.random() < 0.1 else None
    for fd in fields:
        if fd.is_repeated:
            count = rng.choice((0, 0, 1, 2, 3, 8))
        else:
            count = 1 if (fd.is_required and rng.random() < 0.95) or rng.random() < 0.6 else 0
        for _ in range(count):
            wire, value = _field_value(rng, fd, depth)
            out += encode_varint((fd.number << 3) | wire)
            if isinstance(value, bytes):
                out += encode_varint(len(value)) + value
            else:
                out += encode_varint(value)
    if rng.random() < 0.03:  # an unknown field
        out += encode_varint((rng.randrange(30, 2000) << 3) | _WIRE_VARINT) + b"\x01"
    return bytes(out)


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    """Apply one to three blind mutations to ``data``."""
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        choice = rng.randrange(7)
        if choice == 0 and buf:  # flip bits of one byte
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif choice == 1 and buf:  # truncate
            del buf[rng.randrange(len(buf)) :]
        elif choice == 2:  # insert random bytes
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = rng.randbytes(rng.randrange(1, 9))
        elif choice == 3 and buf:  # delete a slice
            start = rng.randrange(len(buf))
            del buf[start : start + rng.randrange(1, 16)]
        elif choice == 4 and corpus:  # splice with another input
            other = rng.choice(corpus)
            cut = rng.randrange(len(buf) + 1)
            buf = buf[:cut] + other[rng.randrange(len(other) + 1) :]
        elif choice == 5 and buf:  # an interesting byte
            buf[rng.randrange(len(buf))] = rng.choice((0x00, 0x7F, 0x80, 0xFF, 0x0A, 0x12))
        else:  # duplicate a slice
            start = rng.randrange(len(buf) + 1)
            buf[start:start] = buf[start : start + rng.randrange(1, 32)]
    return bytes(buf)
