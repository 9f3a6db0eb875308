"""``tubemq-aio partitions`` and ``tubemq-aio lag``: read-only looks at a topic and a group."""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import Iterator, Sequence

from tubemq_aio.cli._common import EXIT_OK
from tubemq_aio.cli._connect import open_client
from tubemq_aio.consumer import ClientBalancedConsumer, PartitionPosition
from tubemq_aio.errors import ServerError, server_error

__all__ = ["format_table", "group_joined", "lag_rows", "run_lag", "run_partitions"]

#: The master's answer to a client-balanced member of a group whose members consume another
#: way (``CLIENT_INCONSISTENT_CONSUMETYPE``, docs/protocol/consumer.md).
_INCONSISTENT_CONSUME_TYPE = 424


@contextlib.contextmanager
def group_joined(group: str) -> Iterator[None]:
    """Say what the master's 424 means to ``lag`` and ``reset``, which join ``group`` as a
    client-balanced member: its server-balanced consumers are online.

    Raises:
        ServerError: the refusal, with that explanation (other errors pass unchanged).
    """
    try:
        yield
    except ServerError as err:
        if err.err_code != _INCONSISTENT_CONSUME_TYPE:
            raise
        raise server_error(
            err.err_code,
            f"{err.err_msg}: group {group!r} has server-balanced consumers online, and this "
            "command joins it as a client-balanced member for a moment: stop them first",
        ) from err


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain aligned columns (numbers right-aligned), one row per line.

    Args:
        header: column titles.
        rows: the cells.

    Returns:
        The table text, ending with a newline.
    """
    cells = [list(header), *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [
        all(isinstance(row[i], int) for row in rows) and bool(rows) for i in range(len(header))
    ]
    lines = []
    for row in cells:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines) + "\n"


def lag_rows(positions: Sequence[PartitionPosition]) -> list[list[object]]:
    """Table rows for ``lag``: partition, the group's offset, the max offset, the lag.

    There is no total: partitions of one broker store share one index, so each of them
    reports the store's offsets and their lags overlap.
    """
    return [[p.partition_key, p.current_offset, p.max_offset, p.lag] for p in positions]


async def run_partitions(args: argparse.Namespace) -> int:
    """Print the partitions of ``args.topic`` as the master lists them.

    A throw-away client-balanced group asks the master (``GetPartMeta``); it reads nothing.
    """
    group = f"tubemq-aio-cli-{uuid.uuid4().hex[:12]}"
    async with open_client(
        ClientBalancedConsumer, args, group=group, topics=[args.topic]
    ) as consumer:
        metas = await consumer.partitions()
    rows = [
        [m.partition_key, m.broker, m.partition_id, "yes" if m.subscribable else "no"]
        for m in metas
    ]
    print(format_table(["partition", "broker", "id", "subscribable"], rows), end="")
    return EXIT_OK


async def run_lag(args: argparse.Namespace) -> int:
    """Print, per partition of ``args.topic``, group ``args.group``'s offset, the max and the lag.

    Each partition is registered for the group as a client-balanced member just long enough to
    learn its stored offset from the broker, then released without committing anything (a
    group that never consumed starts at the earliest message, so its lag is everything
    stored). The master refuses while the group is consumed by server-balanced members;
    stop them first.
    """
    with group_joined(args.group):
        async with open_client(
            ClientBalancedConsumer,
            args,
            group=args.group,
            topics=[args.topic],
            consume_from="earliest",
        ) as consumer:
            metas = await consumer.partitions()
            positions = [await consumer.connect(m.partition_key) for m in metas]
    print(format_table(["partition", "offset", "max", "lag"], lag_rows(positions)), end="")
    return EXIT_OK
