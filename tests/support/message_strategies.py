"""Hypothesis strategies for stored messages as a broker returns them, shared by the consumer's
decode tests and the Spark source's column tests (both compare a pure and a compiled decoder).

A message is drawn as ``(message_id, crc, data, flag)``: a plain body, a body encoded with
attributes, type and time the way a producer stores it, or random bytes under a random flag, with
a correct or a wrong checksum.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tubemq_aio.protocol.message import checksum, encode_message

#: Attribute keys and values the encoder accepts (no separators, not blank, no reserved name).
attribute_text = st.text(
    st.characters(exclude_characters=",=", exclude_categories=["Cs"]), min_size=1, max_size=8
).filter(lambda t: t.strip() and "$msg" not in t)


@st.composite
def stored_messages(
    draw: st.DrawFn, max_body: int = 64, any_int32: bool = False
) -> tuple[int, int, bytes, int]:
    """One stored message. ``any_int32`` widens the flag, checksum and id of the random and
    wrong-checksum cases to every value their wire fields can carry (not only plausible ones)."""
    kind = draw(st.sampled_from(["plain", "encoded", "random"]))
    body = draw(st.binary(min_size=1, max_size=max_body))
    if kind == "plain":
        data, flag = body, draw(st.sampled_from([0, 2, 4]))
    elif kind == "encoded":
        enc = encode_message(
            body,
            attributes=draw(st.dictionaries(attribute_text, attribute_text, max_size=3)),
            msg_type=draw(st.sampled_from([None, "a", "b", " c "])),
            msg_time=draw(st.sampled_from([None, "202401011200", "202612312359"])),
        )
        data, flag = enc.data, enc.flag | draw(st.sampled_from([0, 4]))
    else:
        data = draw(st.binary(max_size=40))
        flags = st.integers(0, 7)
        flag = draw(st.one_of(flags, st.integers(-(2**31), 2**31 - 1)) if any_int32 else flags)
    low = -(2**31) if any_int32 else 0
    crc = checksum(data) if draw(st.booleans()) else draw(st.integers(low, 2**31 - 1))
    ids = st.integers(-(2**63), 2**63 - 1)
    message_id = draw(st.one_of(st.integers(0, 2**40), ids) if any_int32 else ids)
    return message_id, crc, data, flag
