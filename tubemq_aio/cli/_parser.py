"""The argparse definition of ``tubemq-aio``: every option, its check and its help text."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import textwrap
from datetime import UTC, datetime
from typing import NoReturn
from zoneinfo import ZoneInfo

from tubemq_aio import __version__
from tubemq_aio.admin import DEFAULT_WEB_PORT
from tubemq_aio.checks import iana_zone, is_utf8
from tubemq_aio.cli._common import EXIT_USAGE, PROG, error_line
from tubemq_aio.cli._connect import add_connection_options
from tubemq_aio.cli._listing import WEB_ENV
from tubemq_aio.cli._web_port import PROBE_TIMEOUT
from tubemq_aio.errors import ConfigError, InvalidMessageError
from tubemq_aio.protocol.attributes import attribute_block
from tubemq_aio.protocol.time_search import parse_time_text

__all__ = ["MASTER_ENV", "MASTER_FROM_ENV", "build_parser", "parse_arguments"]

MASTER_ENV = "TUBEMQ_AIO_MASTER"
#: The attribute :func:`parse_arguments` sets on the namespace: True when the master address
#: came from ``$TUBEMQ_AIO_MASTER`` rather than ``--master`` (errors name where it came from).
MASTER_FROM_ENV = "master_from_env"

DESCRIPTION = """\
Command-line tool of tubemq-aio, the asyncio client of Apache InLong TubeMQ: send lines to a
topic, print a group's (or a partition's) messages as JSON lines, list topics, groups and a
topic's partitions, show a group's lag, and run a local test cluster (or an in-memory fake)."""

EPILOG = f"""\
examples:
  seq 1000 | {PROG} produce --master 127.0.0.1:8715 --topic demo
  {PROG} consume --master 127.0.0.1:8715 --topic demo --group g1 --from earliest --count 1000
  {PROG} consume ... --format json | jq .body
  {PROG} partitions --master 127.0.0.1:8715 --topic demo
  {PROG} lag --master 127.0.0.1:8715 --topic demo --group g1
  {PROG} topics --web 127.0.0.1:8080 --format json;  {PROG} groups --web 127.0.0.1:8080
  {PROG} consume --master 127.0.0.1:8715 --topic demo --partition all --offset earliest -e
  {PROG} consume ... --partition all --offset @2026-11-29T10:00:00Z -e
  {PROG} reset --master 127.0.0.1:8715 --topic demo --group g1 --to-time 2026-11-29T10:00:00Z
  {PROG} cluster up --fake --topic demo:3   (in-memory fake, no Java; Ctrl-C or `cluster down`)
  {PROG} cluster up --topic demo:3     (real TubeMQ; then `cluster status`, `cluster down`)

--master defaults to ${MASTER_ENV}. Exit status: 0 success, 1 runtime failure (unreachable
master, failed sends, timeout), 2 usage error, 130 Ctrl-C while connecting (see docs/cli.md)."""


#: The width of the texts printed as written (the epilogs, and the description they force raw).
RAW_WIDTH = 95

COUNT_NOTE = """\
note on --count with --group: TubeMQ commits whole broker batches (a consumer acknowledges the
last batch it fetched, never a single message), so when the N-th message falls inside a batch,
that batch is not committed and the next run of the group prints its messages again
(at-least-once). To make the next run start right after the last line printed, add
--finish-batch (prints N or more messages). With --partition the same holds for the
partition's stored group offset."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``tubemq-aio: error: ...`` with a pointer to ``--help`` and exit 2."""
        error_line(f"{message} (see `{self.prog} --help`)")
        sys.exit(EXIT_USAGE)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1)


#: The most ``--concurrency``: the producer's default ``max_in_flight_sends``; more workers
#: would only wait for its window (each one is a task).
MAX_CONCURRENCY = 4096


def _concurrency(text: str) -> int:
    value = _int_at_least(text, 1)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_CONCURRENCY}")
    return value


def _utf8_text(text: str) -> str:
    """A text option sent in messages: an argument that is not UTF-8 (decoded with
    surrogateescape) could not be encoded in the message."""
    if not is_utf8(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text")
    return text


def _msg_type(text: str) -> str:
    """``produce --msg-type``: UTF-8 text a message may carry as its type (no ``,``, ``=`` or
    ``$msgTime$``), refused before any line is read rather than failing every line."""
    _utf8_text(text)
    try:
        attribute_block(text, "", ())
    except InvalidMessageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _time(text: str) -> datetime:
    """``@TIME`` (or ``TIME`` for ``--to-time``): an RFC 3339 time with a zone, between
    0001-01-02 and 9999-12-30 UTC."""
    try:
        return parse_time_text(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _zone(text: str) -> ZoneInfo:
    """``--msg-time-zone``: an IANA time zone name."""
    zone = iana_zone(text)
    if zone is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IANA time zone such as UTC or Asia/Shanghai"
        )
    return zone


def _add_msg_time_zone(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--msg-time-zone",
        type=_zone,
        default=UTC,
        metavar="ZONE",
        help="the IANA zone producers stamped msg_time in, for @TIME and --to-time (default "
        "UTC; Java producers stamp their local time, e.g. Asia/Shanghai)",
    )


#: The largest index offset: the wire field is an int64.
_MAX_OFFSET = 2**63 - 1


def _offset(text: str) -> int | str | datetime:
    """``--offset``: an index offset in ``[0, 2**63 - 1]``, ``earliest``, ``latest`` or
    ``@TIME``."""
    if text.startswith("@"):
        return _time(text)
    if text in ("earliest", "latest"):
        return text
    value = _int_at_least(text, 0)
    if value > _MAX_OFFSET:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {_MAX_OFFSET}")
    return value


def _consume_from(text: str) -> str | datetime:
    """``--from``: ``earliest``, ``latest``, ``latest_always`` or ``@TIME``."""
    if text.startswith("@"):
        return _time(text)
    if text not in ("earliest", "latest", "latest_always"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one of earliest, latest, latest_always, @TIME"
        )
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return value


#: Commands that talk to the master's client port: they need ``--master`` (or the variable).
NEEDS_MASTER = ("produce", "consume", "partitions", "lag", "reset")


def _add_verbosity(parser: argparse.ArgumentParser, prefix: str) -> None:
    """``-v`` and ``-q``, on the main parser (``prefix`` "") and on every command (``prefix``
    "sub_", merged by :func:`parse_arguments`), so both work before and after the command."""
    parser.add_argument(
        "-v",
        "--verbose",
        dest=f"{prefix}verbose",
        action="count",
        default=0,
        help="log client events (-vv: debug)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        dest=f"{prefix}quiet",
        action="store_true",
        help="no progress or summary on stderr, only errors",
    )


def _add_master(parser: argparse.ArgumentParser) -> None:
    """``--master`` and the TLS and authentication options (every client command has them)."""
    parser.add_argument(
        "--master",
        metavar="ADDR",
        help=f"master address(es), host:port[,host:port], or a URL tubemq://[user:pass@]host:port "
        f"(tubemqs:// for TLS) (default ${MASTER_ENV})",
    )
    add_connection_options(parser)


def _add_produce(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser(
        "produce",
        help="send one message per input line",
        description="Send one message per line of FILE (or stdin). Empty lines are skipped. "
        "A progress bar with the rate is drawn when stderr is a terminal; a summary is "
        "printed at the end. Exit 1 if any line failed.",
    )
    _add_master(p)
    p.add_argument("--topic", required=True, help="topic to publish to")
    p.add_argument(
        "--attr", action="append", type=_utf8_text, metavar="K=V", help="attribute; repeatable"
    )
    p.add_argument(
        "--msg-type",
        type=_msg_type,
        metavar="X",
        help="message type (consumers can filter on it)",
    )
    p.add_argument(
        "--key",
        type=_utf8_text,
        metavar="K",
        help="partition key: equal keys go to one partition",
    )
    p.add_argument("--rate", type=_positive_float, metavar="N", help="at most N messages/s")
    p.add_argument(
        "--json",
        action="store_true",
        help='lines are JSON objects {"body", "attributes", "msg_type", "key", "msg_time", '
        '"body_encoding": "base64"?} (what `consume --format json` prints)',
    )
    p.add_argument(
        "--concurrency",
        type=_concurrency,
        default=64,
        metavar="N",
        help=f"sends in flight at once (default 64, at most {MAX_CONCURRENCY}; 1 keeps the "
        "input order)",
    )
    p.add_argument("input", nargs="?", default="-", metavar="FILE|-", help="input (default -)")


def _add_consume(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser(
        "consume",
        help="print a group's (or a partition's) messages as JSON lines or raw bodies",
        # Raw (for the note's own line breaks), so the description is wrapped here.
        description=textwrap.fill(
            "Consume as a member of GROUP (the master assigns the partitions), or read "
            "the partitions named by --partition from --offset (client-balanced: this process "
            "alone reads them), and print each message; a batch is acked once its lines are "
            "written. Ends on --count, --exit-at-end, --timeout, Ctrl-C or SIGTERM, closing "
            "the consumer cleanly. JSON lines: {topic, partition_key, message_id (a string), "
            "msg_type, msg_time, attributes, body, body_encoding (utf-8 or base64)}: `produce "
            "--json` sends such a line again as the same message.",
            width=RAW_WIDTH,
        ),
        epilog=COUNT_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_master(p)
    p.add_argument("--topic", required=True, help="topic to read")
    p.add_argument(
        "--group",
        help="consumer group (needed without --partition; with it, default a throw-away group)",
    )
    p.add_argument(
        "--partition",
        action="append",
        metavar="KEY|all",
        help="read this partition (brokerId:topic:partitionId, see `partitions`) with the "
        "client-balanced consumer; `all`: every partition of the topic; repeatable",
    )
    p.add_argument(
        "--offset",
        type=_offset,
        metavar="N|earliest|latest|@TIME",
        help="with --partition: start at index offset N (28 bytes per message; a batch start "
        "the broker reported, e.g. from `lag`), the oldest or the newest message, or the first "
        "message stamped (msg_time) at or after TIME, e.g. @2026-11-29T10:00:00Z (default: "
        "where the group left off, else --from)",
    )
    p.add_argument(
        "--from",
        dest="consume_from",
        type=_consume_from,
        metavar="earliest|latest|latest_always|@TIME",
        default="latest",
        help="where a group without a stored offset starts (default latest); @TIME: every "
        "partition starts at its first message stamped (msg_time) at or after TIME, whatever "
        "the group stored",
    )
    _add_msg_time_zone(p)
    p.add_argument(
        "--count",
        type=_positive_int,
        metavar="N",
        help="stop after N messages (see the note on --count below)",
    )
    p.add_argument(
        "--finish-batch",
        action="store_true",
        help="with --count: print on to the end of the broker batch holding the N-th message "
        "and commit it, so the next run starts right after the last line printed",
    )
    p.add_argument(
        "-e",
        "--exit-at-end",
        action="store_true",
        help="stop once every partition read is at its end (exit 0)",
    )
    p.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="S",
        help="stop after S seconds without a message, counted from the start (leave room "
        "for the group join, often 10-20 s); exit 1 if --count was not reached",
    )
    p.add_argument("--format", choices=("json", "raw"), default="json", help="default json")
    p.add_argument("--msg-type", metavar="X", help="only messages of this type (server filter)")


def _add_inspect(sub: argparse._SubParsersAction[_Parser]) -> None:
    p = sub.add_parser(
        "partitions",
        help="list a topic's partitions",
        description="List the partitions of TOPIC as the master knows them.",
    )
    _add_master(p)
    p.add_argument("--topic", required=True, help="topic")
    _add_table_format(p)
    p = sub.add_parser(
        "lag",
        help="show a group's offset, max offset and lag per partition",
        description="Table of partition, the group's offset, the max offset and the lag in "
        "messages. Reads the group's stored offsets by registering each partition briefly; "
        "run it while the group's server-balanced consumers are stopped (the master refuses "
        "otherwise). A group that never consumed counts everything stored as lag. Partitions of "
        "one broker store share an index, so each reports the whole store's offsets.",
    )
    _add_master(p)
    p.add_argument("--topic", required=True, help="topic")
    p.add_argument("--group", required=True, help="consumer group")
    _add_table_format(p)
    p = sub.add_parser(
        "reset",
        help="move a group's offsets to a point in time",
        description="Set group GROUP's stored offset of every partition of TOPIC to its first "
        "message stamped (msg_time, minute granularity) at or after --to-time (a time after the "
        "newest message: right after the last one). Prints partition, old and new offset. The "
        "search reads with the group GROUP_planner, so --dry-run changes nothing. Run it while "
        "the group's consumers are stopped (the master refuses otherwise).",
    )
    _add_master(p)
    p.add_argument("--topic", required=True, help="topic")
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument(
        "--to-time",
        required=True,
        type=_time,
        metavar="TIME",
        help="RFC 3339 time with a zone, e.g. 2026-11-29T10:00:00Z",
    )
    _add_msg_time_zone(p)
    p.add_argument(
        "--dry-run", action="store_true", help="print old -> new per partition, change nothing"
    )
    _add_table_format(p)


def _add_table_format(parser: argparse.ArgumentParser) -> None:
    """``--format table|json`` of the commands that print a table (json: one array of objects
    with the table's fields)."""
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table, or json: one array of objects (default table)",
    )


def _add_listing(sub: argparse._SubParsersAction[_Parser]) -> None:
    where = (
        "Asks the master's HTTP web API (its client port offers no listing): --web HOST:PORT, "
        f"else ${WEB_ENV}, else the --master host at port {DEFAULT_WEB_PORT}."
    )
    for name, text in (
        ("topics", "list the topics the master has configured"),
        ("groups", "list the consumer groups with members online, their topics and members"),
    ):
        p = sub.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}. {where}")
        p.add_argument(
            "--master",
            metavar="ADDR",
            default=os.environ.get(MASTER_ENV),
            help=f"master address; its host is the web API's default host (default ${MASTER_ENV})",
        )
        p.add_argument(
            "--web",
            metavar="HOST:PORT",
            default=os.environ.get(WEB_ENV),
            help=f"the master's web API address (default ${WEB_ENV})",
        )
        p.add_argument(
            "--web-timeout",
            type=_positive_float,
            default=PROBE_TIMEOUT,
            metavar="SECONDS",
            help="seconds the web API address has to start answering before the listing "
            f"fails naming it (default {PROBE_TIMEOUT:g}); the answer itself may take 10 s",
        )
        _add_table_format(p)
        if name == "groups":
            p.add_argument("--topic", help="only groups that subscribe to this topic")
        else:
            p.add_argument(
                "--all",
                action="store_true",
                help="also the servers' internal topics (__offset_history__)",
            )


def build_parser() -> argparse.ArgumentParser:
    """The complete ``tubemq-aio`` parser (``cluster`` is handed on to the testing CLI).

    Returns:
        The parser.
    """
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, "")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_produce(sub)
    _add_consume(sub)
    _add_inspect(sub)
    _add_listing(sub)
    for command in sub.choices.values():
        _add_verbosity(command, "sub_")
    sub.add_parser(
        "cluster",
        help="up|down|status of a local TubeMQ test cluster (Java 17 and Maven; "
        "`up --fake`: an in-memory fake, only Python)",
        add_help=False,
    )
    return parser


#: What may come before the command name: -v, -q, -h in any combination, and the long forms.
_MAIN_OPTION = re.compile(r"-[vqh]+|--(verbose|quiet|help|version)")


def _check_command_first(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse a command's option given before the command name (``tubemq-aio --master M lag
    ...``) with a line saying where it goes; argparse took its value for the command name and
    said ``invalid choice: 'M'``. Anything else is left to argparse."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    theirs = {
        option
        for command in commands.choices.values()
        for action in command._actions
        for option in action.option_strings
    }
    for token in argv:
        if not token.startswith("-"):
            return  # the command name
        if _MAIN_OPTION.fullmatch(token):
            continue
        option = token.split("=", 1)[0]
        if option in theirs:
            parser.error(
                f"{option} goes after the command name, e.g. `{PROG} COMMAND {option} ...`; "
                "only -v, -q, --version and --help go before it"
            )
        return


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """Parse ``tubemq-aio ARGV`` (every command but ``cluster``).

    ``-v`` counts wherever it is given (``-v consume -v`` is ``-vv``); ``-q`` holds before or
    after the command.

    Raises:
        SystemExit: 2 on a usage error (one line on stderr; a command that needs a master
            without ``--master`` and without ``$TUBEMQ_AIO_MASTER`` is one), 0 for ``--help``.
    """
    parser = build_parser()
    _check_command_first(parser, argv)
    args = parser.parse_args(argv)
    args.verbose += args.__dict__.pop("sub_verbose", 0)
    sub_quiet = args.__dict__.pop("sub_quiet", False)
    args.quiet = args.quiet or sub_quiet
    from_env = args.command in NEEDS_MASTER and args.master is None
    setattr(args, MASTER_FROM_ENV, from_env and bool(os.environ.get(MASTER_ENV)))
    if from_env:
        args.master = os.environ.get(MASTER_ENV)
    if args.command in NEEDS_MASTER and not args.master:
        parser.error(
            f"{args.command} needs the master: give --master HOST:PORT or set ${MASTER_ENV}"
        )
    return args
