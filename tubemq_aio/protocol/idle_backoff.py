"""How long a partition that keeps answering "no new data" rests before its next fetch.

The official clients fetch every partition again ``msgNotFoundWaitPeriodMs`` after each empty
answer (docs/protocol/consumer.md §4.3, §7.3), so an idle consumer sends about
``partitions / msg_not_found_wait`` requests a second forever. This client doubles the rest
after each consecutive empty answer, from the base wait up to a ceiling, and returns to the
base wait at the first answer with data. Busy partitions are never affected (they do not
answer 404); an idle one costs ``1 / ceiling`` requests a second, and the first message after
an idle spell waits at most ``ceiling`` seconds longer than with a fixed period.
"""

from __future__ import annotations

from dataclasses import dataclass

from tubemq_aio.errors import ConsumerConfigError

__all__ = ["IdleBackoff"]


@dataclass(frozen=True, slots=True)
class IdleBackoff:
    """The doubling rest after consecutive empty fetches of one partition.

    Attributes:
        base_ms: the rest after the first empty answer (``msg_not_found_wait``), ms ≥ 0.
        ceiling_ms: the longest rest (``msg_not_found_max_wait``), ms ≥ ``base_ms``;
            equal to ``base_ms`` gives the official clients' fixed period.

    Raises:
        ConsumerConfigError: a negative wait, or ``ceiling_ms < base_ms``.
    """

    base_ms: int
    ceiling_ms: int

    def __post_init__(self) -> None:
        if self.base_ms < 0 or self.ceiling_ms < self.base_ms:
            raise ConsumerConfigError(
                f"idle backoff needs 0 <= base_ms <= ceiling_ms, got {self.base_ms} and "
                f"{self.ceiling_ms}"
            )

    def wait_ms(self, empty_fetches: int) -> int:
        """The rest after the ``empty_fetches``-th consecutive empty answer (1 = the first):
        ``base_ms * 2 ** (empty_fetches - 1)``, at most ``ceiling_ms``; ``base_ms`` for
        ``empty_fetches`` ≤ 1 (the count is reset by any answer with data). A base of 0 (no
        rest at all) stays 0."""
        if empty_fetches <= 1 or self.base_ms == 0:
            return self.base_ms
        if empty_fetches > 64:  # 2**63 ms is past any ceiling; no need for huge integers
            return self.ceiling_ms
        return min(self.ceiling_ms, self.base_ms << (empty_fetches - 1))
