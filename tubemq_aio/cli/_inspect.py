"""``tubemq-aio partitions`` and ``tubemq-aio lag``: read-only looks at a topic and a group."""

from __future__ import annotations

import argparse
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence

from tubemq_aio.cli._common import EXIT_OK
from tubemq_aio.cli._connect import open_client
from tubemq_aio.consumer import ClientBalancedConsumer, PartitionPosition
from tubemq_aio.errors import ServerError, server_error

__all__ = [
    "emit_rows",
    "format_table",
    "group_member",
    "lag_rows",
    "run_lag",
    "run_partitions",
]

#: The master's answer to a client-balanced member of a group whose members consume another
#: way (``CLIENT_INCONSISTENT_CONSUMETYPE``, docs/protocol/consumer.md).
_INCONSISTENT_CONSUME_TYPE = 424


@contextlib.asynccontextmanager
async def group_member(
    args: argparse.Namespace, group: str, topics: list[str]
) -> AsyncIterator[ClientBalancedConsumer]:
    """A client-balanced member of ``group`` for ``lag`` and ``reset``, which join the group
    for a moment to learn (and set) its stored offsets: unregistered partitions start at the
    earliest offset, and a refusal of the master ends the command at once (one register
    round, not the ``register_attempts`` window a consumer keeps trying for).

    Raises:
        ServerError: the master's refusal; for a 424 (its server-balanced consumers are
            online) what it means and what to do, instead of the master's text. Other errors
            pass unchanged.
    """
    with _explained_424(group):
        async with open_client(
            ClientBalancedConsumer,
            args,
            group=group,
            topics=topics,
            consume_from="earliest",
            register_attempts=1,
        ) as consumer:
            yield consumer


@contextlib.contextmanager
def _explained_424(group: str) -> Iterator[None]:
    try:
        yield
    except ServerError as err:
        if err.err_code != _INCONSISTENT_CONSUME_TYPE:
            raise
        # The master's own text is left out: a generated consumer id and "inconsistency with
        # other consumers using unbound subscribe", nothing a reader can act on.
        raise server_error(
            err.err_code,
            f"group {group!r} has server-balanced consumers online, and this command joins it "
            "as a client-balanced member for a moment, which the master refuses: stop them "
            "first",
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


def emit_rows(rows: Sequence[dict[str, object]], fmt: str, columns: Sequence[str]) -> None:
    """Print ``rows`` on stdout as a table (``fmt`` ``"table"``) or one JSON array.

    Args:
        rows: one mapping per row, with at least the keys ``columns``.
        fmt: ``"table"`` or ``"json"`` (every key of every row, as given).
        columns: the table's columns, in order (in the table, list values are joined with
            ``,`` and booleans read ``yes``/``no``).
    """
    if fmt == "json":
        print(json.dumps(list(rows), ensure_ascii=False))
        return
    print(format_table(columns, [[_cell(r[c]) for c in columns] for r in rows]), end="")


def _cell(value: object) -> object:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value


def lag_rows(positions: Sequence[PartitionPosition]) -> list[dict[str, object]]:
    """Rows for ``lag``: partition, the group's offset, the max offset, the lag.

    There is no total: partitions of one broker store share one index, so each of them
    reports the store's offsets and their lags overlap.
    """
    return [
        {
            "partition": p.partition_key,
            "offset": p.current_offset,
            "max": p.max_offset,
            "lag": p.lag,
        }
        for p in positions
    ]


async def run_partitions(args: argparse.Namespace) -> int:
    """Print the partitions of ``args.topic`` as the master lists them (``args.format``:
    ``table`` or ``json``).

    A throw-away client-balanced group asks the master (``GetPartMeta``); it reads nothing. Like
    ``lag``, it makes one register round: a master nobody answers at ends the command at once.
    """
    group = f"tubemq-aio-cli-{uuid.uuid4().hex[:12]}"
    async with open_client(
        ClientBalancedConsumer, args, group=group, topics=[args.topic], register_attempts=1
    ) as consumer:
        metas = await consumer.partitions()
    rows: list[dict[str, object]] = [
        {
            "partition": m.partition_key,
            "broker": m.broker,
            "id": m.partition_id,
            "subscribable": m.subscribable,
        }
        for m in metas
    ]
    emit_rows(rows, args.format, ["partition", "broker", "id", "subscribable"])
    return EXIT_OK


async def run_lag(args: argparse.Namespace) -> int:
    """Print, per partition of ``args.topic``, group ``args.group``'s offset, the max and the lag
    (``args.format``: ``table`` or ``json``).

    Each partition is registered for the group as a client-balanced member just long enough to
    learn its stored offset from the broker, then released without committing anything (a
    group that never consumed starts at the earliest message, so its lag is everything
    stored). The master refuses while the group is consumed by server-balanced members;
    stop them first.
    """
    async with group_member(args, args.group, [args.topic]) as consumer:
        metas = await consumer.partitions()
        positions = [await consumer.connect(m.partition_key) for m in metas]
    emit_rows(lag_rows(positions), args.format, ["partition", "offset", "max", "lag"])
    return EXIT_OK
