"""``tubemq-aio topics`` and ``tubemq-aio groups``: listings from the master's HTTP web API.

The master's client protocol (the port clients use) has no call that lists topics or groups;
its web API (``/webapi.htm`` on the master's web port, 8080 by default) does:
``admin_query_topic_info`` (every configured topic) and ``admin_query_sub_info`` (the groups
with consumers online, each with its topics and member count). Read-only queries need no token.
Without ``--web`` the address is the one ``tubemq-aio cluster up`` recorded in its state file
(for that ``--master``), else the master's host at port 8080.
The client is the SDK's :class:`tubemq_aio.admin.MasterWebApi`. ``topics`` leaves out the
servers' internal topics (:data:`tubemq_aio.admin.INTERNAL_TOPICS`) unless ``--all`` is given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.error import URLError
from urllib.parse import urlsplit

from tubemq_aio.admin import DEFAULT_WEB_PORT, INTERNAL_TOPICS, MasterWebApi
from tubemq_aio.checks import Checks
from tubemq_aio.cli._common import EXIT_FAILURE, EXIT_OK, error_line
from tubemq_aio.cli._inspect import emit_rows
from tubemq_aio.cli._web_port import WebPort, probe_web_port
from tubemq_aio.config import DEFAULT_MASTER_PORT, HostPort, parse_host_port
from tubemq_aio.errors import ConfigError

__all__ = [
    "WEB_ENV",
    "group_rows",
    "run_groups",
    "run_topics",
    "topic_rows",
    "web_endpoint",
]

WEB_ENV = "TUBEMQ_AIO_MASTER_WEB"
#: Seconds one web API request may take.
WEB_TIMEOUT = 10.0


def web_endpoint(web: str | None, master: str | None) -> tuple[str, int]:
    """``(host, port)`` of the web API: ``--web host:port`` (or ``http://host:port[/...]``),
    else the first master's host (read as the clients read it: ``[ipv6]:port`` or a bare IPv6
    literal) with port :data:`DEFAULT_WEB_PORT`.

    Raises:
        ConfigError: neither is given, or the address given has no valid host or port (the
            message names the option it came from).
    """
    checks = Checks("arguments")
    if web:
        text = web if "://" in web else f"http://{web}"
        given = f"--web {web!r}"
    elif master:
        first = master.split("://", 1)[-1].rpartition("@")[2].split(",")[0].split("?")[0]
        given = f"--master {first!r}"
        try:
            host = parse_host_port(first, default_port=DEFAULT_MASTER_PORT).host
        except ConfigError as exc:
            checks.fail(f"{given}: {exc}")
        text = f"http://{HostPort(host, DEFAULT_WEB_PORT)}"
    else:
        checks.fail(f"give the master's web API address: --web HOST:PORT or ${WEB_ENV}")
    parts = urlsplit(text)
    port = DEFAULT_WEB_PORT
    try:
        port = parts.port or DEFAULT_WEB_PORT
    except ValueError:
        checks.problem(f"{given}: not HOST:PORT")
    if parts.scheme != "http" or not parts.hostname:
        checks.fail(f"{given}: expected HOST:PORT or http://HOST:PORT")
    checks.done()
    return parts.hostname, port


def topic_rows(items: list[dict[str, Any]], *, internal: bool = False) -> list[dict[str, Any]]:
    """One record per topic: name, configured and running partitions, publish/subscribe.

    Args:
        items: the ``data`` items of ``admin_query_topic_info``.
        internal: keep the servers' own topics (``__offset_history__``); default False.
    """
    return sorted(
        (
            {
                "topic": str(item.get("topicName", "")),
                "partitions": int(item.get("totalCfgNumPart") or 0),
                "running_partitions": int(item.get("totalRunNumPartCount") or 0),
                "publish": bool(item.get("isSrvAcceptPublish")),
                "subscribe": bool(item.get("isSrvAcceptSubscribe")),
            }
            for item in items
            if internal or str(item.get("topicName", "")) not in INTERNAL_TOPICS
        ),
        key=lambda r: r["topic"],
    )


def group_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per online group: name, subscribed topics, consumers online."""
    return sorted(
        (
            {
                "group": str(item.get("consumeGroup", "")),
                "topics": sorted(str(t) for t in item.get("topicSet") or ()),
                "consumers": int(item.get("consumerNum") or 0),
            }
            for item in items
        ),
        key=lambda r: r["group"],
    )


def _web(args: argparse.Namespace) -> str | None:
    """``--web`` / ``$TUBEMQ_AIO_MASTER_WEB``, else the web API ``cluster up`` recorded for this
    master (or for any master when ``--master`` is not given).

    Raises:
        ConfigError: the master is the fake ``cluster up --fake`` recorded, which has no web API
            (the guess ``host:8080`` would ask whatever else listens there, or nothing).
    """
    if args.web:
        return str(args.web)
    from tubemq_aio.testing.cluster import is_recorded_fake, recorded_web_api

    if is_recorded_fake(args.master):
        Checks("arguments").fail(
            f"the fake cluster (`cluster up --fake`) has no web API to list {args.command} from: "
            "use a real cluster (`cluster up` without --fake) or --web HOST:PORT of a real master"
        )
    return recorded_web_api(args.master)


async def _query(args: argparse.Namespace, method: str, **params: object) -> dict[str, Any]:
    host, port = web_endpoint(_web(args), args.master)
    return await MasterWebApi(host, port, timeout=WEB_TIMEOUT).raw(method, dict(params))


def _not_a_web_port(found: WebPort, where: str, args: argparse.Namespace) -> str:
    """Why ``where`` is not the web API, when the probe (:func:`probe_web_port`) tells; else
    ``""`` (the web request then says what it meets)."""
    if found in (WebPort.CLIENT_PORT, WebPort.LEGACY_CLIENT_PORT):
        return f"{where} is {found.value}, which has no web API"
    wait = f"{args.web_timeout:g} s (--web-timeout)"
    if found is WebPort.SILENT:
        return (
            f"{where} accepted a connection but answered neither HTTP nor TubeMQ within {wait}, "
            "where the master's web API answers HTTP at once"
        )
    if found is WebPort.NO_CONNECTION:
        return f"no connection to {where} within {wait} (is the host reachable?)"
    return ""


def _items(reply: dict[str, Any]) -> list[dict[str, Any]]:
    data = reply.get("data") or []
    return [item for item in (data if isinstance(data, list) else [data]) if isinstance(item, dict)]


async def _run(
    args: argparse.Namespace,
    method: str,
    rows_of: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    columns: list[str],
    params: dict[str, object],
) -> int:
    host, port = web_endpoint(_web(args), args.master)
    where = str(HostPort(host, port))  # an IPv6 host in brackets, as --web takes it back
    problem = _not_a_web_port(await probe_web_port(host, port, args.web_timeout), where, args)
    if problem:
        error_line(
            f"master web API at {where}: {problem}; set --web to the master's web port "
            f"(webPort in its master.ini, {DEFAULT_WEB_PORT} by default: "
            f"--web {HostPort(host, DEFAULT_WEB_PORT)})"
        )
        return EXIT_FAILURE
    try:
        reply = await _query(args, method, **params)
    except (OSError, ValueError) as err:
        # urllib's URLError wraps the socket's error: "<urlopen error [Errno 111] ...>".
        reason = err.reason if isinstance(err, URLError) else err
        error_line(f"master web API at {where}: {reason} (set --web to the master's web port)")
        return EXIT_FAILURE
    if not reply.get("result"):
        error_line(f"master web API at {where} refused {method}: {reply.get('errMsg')!r}")
        return EXIT_FAILURE
    emit_rows(rows_of(_items(reply)), args.format, columns)
    return EXIT_OK


async def run_topics(args: argparse.Namespace) -> int:
    """List every topic the master has configured."""
    columns = ["topic", "partitions", "running_partitions", "publish", "subscribe"]

    def rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return topic_rows(items, internal=args.all)

    return await _run(args, "admin_query_topic_info", rows, columns, {})


async def run_groups(args: argparse.Namespace) -> int:
    """List the consumer groups with members online (optionally only those of ``--topic``)."""
    params: dict[str, object] = {"topicName": args.topic} if args.topic else {}
    columns = ["group", "topics", "consumers"]
    return await _run(args, "admin_query_sub_info", group_rows, columns, params)
