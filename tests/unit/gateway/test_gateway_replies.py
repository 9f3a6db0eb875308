"""The named views of the lease scripts' answers."""

from __future__ import annotations

from tubemq_aio.gateway.leases.replies import Leased, Reply


def test_an_acquire_answer_names_its_lease() -> None:
    fresh = Reply("leased", 1000, ("1:t:0", -1, 61_000, 0, "latest", -1))
    assert fresh.leased() == Leased("1:t:0", None, 61_000, 0, "latest", None)
    again = Reply("leased", 1000, ("1:t:1", "280", "61000", "2", "", "336"))
    assert again.leased() == Leased("1:t:1", 280, 61_000, 2, "", 336)
    assert Reply("none", 1000, (1200, -1)).next_ready_and_expiry == (1200, -1)
    assert Reply("throttled", 1000, (35,)).wait_ms == 35


def test_settle_init_and_extend_answers_name_their_values() -> None:
    assert Reply("acked", 1, (560,)).committed == 560
    assert Reply("released", 1, (-1,)).committed is None
    already = Reply("already", 1, (280, "nacked"))
    assert (already.committed, already.ended_as) == (280, "nacked")
    assert Reply("ok", 1, (90_000,)).lease_expiry == 90_000
