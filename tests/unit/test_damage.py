"""Damage on the way or at rest (tubemq_aio/protocol/damage.py), with no event loop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.damage import (
    DAMAGED_REREAD_WAIT_MS,
    DAMAGED_REREADS_AT_ONCE,
    damage_at_rest,
    damage_signature,
    reread_wait_ms,
)
from tubemq_aio.protocol.message import checksum


def message(i: int, body: bytes, *, crc_off: int = 0) -> RawMessage:
    return RawMessage(i, checksum(body) ^ crc_off, body, 0)


def test_only_messages_whose_checksum_fails_are_in_the_signature() -> None:
    good, bad = message(1, b"a"), message(2, b"b", crc_off=4)
    assert damage_signature([good]) == ()
    (entry,) = damage_signature([good, bad])
    assert entry[:2] == (2, bad.checksum)


def test_the_same_damage_twice_at_one_offset_is_at_rest() -> None:
    signature = damage_signature([message(2, b"b", crc_off=4)])
    assert not damage_at_rest(None, 56, signature)
    assert damage_at_rest((56, signature), 56, signature)
    assert not damage_at_rest((28, signature), 56, signature)  # another offset


def test_a_checksum_that_matches_is_stored_as_it_is() -> None:
    assert damage_at_rest(None, 0, ())


@given(st.binary(min_size=1, max_size=64), st.integers(0, 7), st.integers(0, 7))
def test_damage_that_changes_between_reads_is_never_at_rest(
    body: bytes, first_bit: int, second_bit: int
) -> None:
    def damaged(bit: int) -> RawMessage:
        return RawMessage(9, checksum(body), bytes([body[0] ^ (1 << bit)]) + body[1:], 0)

    one, two = damage_signature([damaged(first_bit)]), damage_signature([damaged(second_bit)])
    assert one
    assert two
    assert damage_at_rest((0, one), 0, two) == (first_bit == second_bit)


def test_rereads_go_at_once_then_are_paced_never_counted_out() -> None:
    assert [reread_wait_ms(n) for n in range(1, DAMAGED_REREADS_AT_ONCE + 1)] == [0, 0, 0]
    assert reread_wait_ms(DAMAGED_REREADS_AT_ONCE + 1) == DAMAGED_REREAD_WAIT_MS
    assert reread_wait_ms(10**9) == DAMAGED_REREAD_WAIT_MS  # a deadline ends it, not a count
