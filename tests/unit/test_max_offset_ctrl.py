"""MaxOffsetControl: when the master's "consume from the max offset" id asks for a reset."""

from __future__ import annotations

from tubemq_aio.protocol.max_offset_ctrl import MaxOffsetControl


def test_a_new_id_after_the_register_asks_once() -> None:
    control = MaxOffsetControl()
    control.registered(1_000)
    assert not control.observe(None)
    assert not control.observe(-2)
    assert control.ctrl_id == -2
    assert control.observe(2_000)
    assert control.ctrl_id == 2_000
    assert control.pending
    assert control.take()
    assert not control.take()
    assert not control.observe(2_000)  # the same id again: already done
    assert control.observe(3_000)
    assert control.take()


def test_an_id_older_than_the_register_is_only_reported_back() -> None:
    control = MaxOffsetControl()
    control.registered(5_000)
    assert not control.observe(4_000)
    assert control.ctrl_id == 4_000
    assert not control.take()
    control.registered(6_000)  # registered again: later ids still count
    assert control.observe(7_000)
    assert control.take()
