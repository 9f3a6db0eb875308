"""``encode_all``: a ``send_many`` call's plain messages go on as their bodies (the compiled plain
encoder builds their requests, as for a plain ``send``), any other call's as encoded messages;
a body too large for the topic refuses the call, named by its index, either way."""

from __future__ import annotations

import pytest

from tubemq_aio.errors import MessageTooLargeError
from tubemq_aio.producer._encode_many import encode_all
from tubemq_aio.producer._outgoing import Outgoing
from tubemq_aio.protocol.message import EncodedMessage, encode_message

BODIES = [b"a", b"bb", b"x" * 100]


def test_plain_messages_are_their_bodies() -> None:
    encoded = encode_all(Outgoing("t", BODIES[0]), BODIES, 100)
    assert encoded is BODIES
    assert all(type(e) is bytes for e in encoded)


def test_a_key_or_timeout_keeps_the_messages_plain() -> None:
    shared = Outgoing("t", BODIES[0], key="k", timeout=2.0)
    assert encode_all(shared, BODIES, 100) is BODIES


@pytest.mark.parametrize(
    "shared",
    [
        Outgoing("t", b"a", attributes={"k": "v"}),
        Outgoing("t", b"a", msg_type="kind"),
        Outgoing("t", b"a", msg_time="202611292000"),
    ],
)
def test_other_messages_are_encoded_as_a_send_encodes_them(shared: Outgoing) -> None:
    encoded = encode_all(shared, BODIES, 1000)
    assert [type(e) for e in encoded] == [EncodedMessage] * len(BODIES)
    assert encoded == [shared.with_body(b).encode(1000) for b in BODIES]


def test_an_empty_attributes_mapping_is_encoded_as_plain_data() -> None:
    encoded = encode_all(Outgoing("t", b"a", attributes={}), BODIES, 100)
    assert encoded == [encode_message(b) for b in BODIES]
    for e, b in zip(encoded, BODIES, strict=True):
        assert isinstance(e, EncodedMessage)
        assert e.flag == 0
        assert e.data is b


@pytest.mark.parametrize("attributes", [None, {"k": "v"}])
def test_a_body_too_large_refuses_the_call_naming_its_index(
    attributes: dict[str, str] | None,
) -> None:
    bodies = [b"a", b"b" * 5, b"c" * 11]
    with pytest.raises(MessageTooLargeError, match=r"send_many: bodies\[2\]"):
        encode_all(Outgoing("t", b"a", attributes=attributes), bodies, 10)


def test_a_body_exactly_at_the_limit_is_plain() -> None:
    bodies = [b"a" * 10]
    assert encode_all(Outgoing("t", b"a"), bodies, 10) is bodies
