"""``tubemq-aio reset``: move a group's stored offsets to a point in time (docs/protocol/time.md).

Three steps, each with a client-balanced consumer: the time search reads with the group
``{group}_planner`` (so a dry run leaves the group untouched); the group's current offsets are
learnt like ``lag`` does (a brief registration, nothing committed); the new offsets are set by a
positioned peek of the group at each new offset (register there, read, roll back), which leaves
the group's stored offset exactly there.
"""

from __future__ import annotations

import argparse
import sys

from tubemq_aio.cli._common import EXIT_OK
from tubemq_aio.cli._connect import open_client
from tubemq_aio.cli._inspect import emit_rows, format_table, group_member
from tubemq_aio.consumer import ClientBalancedConsumer
from tubemq_aio.protocol.consumer_names import planner_group

__all__ = ["run_reset"]


async def run_reset(args: argparse.Namespace) -> int:
    """Print (and unless ``--dry-run`` apply) ``old -> new`` per partition of ``args.topic``.

    Returns:
        0 on success.

    Raises:
        TubeMQError: the master or a broker refused (e.g. while the group is consumed).
    """
    topics = [args.topic]
    async with open_client(
        ClientBalancedConsumer,
        args,
        group=planner_group(args.group),
        topics=topics,
        msg_time_zone=args.msg_time_zone,
    ) as planner:
        keys = [m.partition_key for m in await planner.partitions()]
        found = await planner.search_times(
            dict.fromkeys(keys, args.to_time), planner.config.time_search_timeout
        )
    async with group_member(args, args.group, topics) as consumer:
        old = {key: (await consumer.connect(key)).current_offset for key in keys}
        for key in keys:
            await consumer.disconnect(key)
        if not args.dry_run:
            for key in keys:
                await consumer.peek_at(key, found[key].offset)
    if args.format == "json":
        moves: list[dict[str, object]] = [
            {
                "partition": key,
                "old": old[key],
                "new": found[key].offset,
                "past_end": found[key].past_end,
            }
            for key in keys
        ]
        emit_rows(moves, "json", [])
    else:
        notes = {key: "(after the newest)" if found[key].past_end else "" for key in keys}
        rows = [[key, old[key], "->", found[key].offset, notes[key]] for key in keys]
        print(format_table(["partition", "old", "", "new", ""], rows), end="")
    if not args.quiet:
        what = "dry run: nothing changed" if args.dry_run else f"group {args.group} reset"
        print(f"{what}; to {args.to_time.isoformat()} (msg_time)", file=sys.stderr)
    return EXIT_OK
