"""``python -m tubemq_aio.testing.cluster up|down|status`` (also ``make cluster-up`` etc.).

``up`` starts a detached cluster, saves its description to a state file and exits, leaving the
JVMs running; ``down`` reads the state file and stops them; ``status`` reports them.
``up --fake`` instead serves the in-memory fake in the foreground (:mod:`tubemq_aio.testing.fake`);
``down`` and ``status`` work on it through the same state file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tubemq_aio.admin import DEFAULT_WEB_PORT
from tubemq_aio.testing._errors import ClusterError
from tubemq_aio.testing._fake_process import (
    DEFAULT_PORT,
    add_fake_arguments,
    parse_topic,
    run_fake,
)
from tubemq_aio.testing._maven import DEFAULT_VERSION
from tubemq_aio.testing._process import kill_pid, pid_alive
from tubemq_aio.testing._state import FAKE_KIND, state_file
from tubemq_aio.testing._up_report import choose_port, progress, up_lines
from tubemq_aio.testing._versions import SERVER_VERSIONS

__all__ = ["main", "state_file"]


def _load() -> dict[str, Any] | None:
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ours(pid: int, marker: str) -> bool:
    """True if ``pid`` is alive and its command line mentions ``marker`` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return pid_alive(pid) and marker.encode() in cmdline


def _is_fake(state: dict[str, Any]) -> bool:
    return state.get("kind") == FAKE_KIND


def _live_pids(state: dict[str, Any]) -> list[tuple[str, int]]:
    # A JVM's command line names our work dir; the fake's names its own option or module.
    marker = "fake" if _is_fake(state) else str(state.get("work_dir", ""))
    nodes = state.get("nodes", [])
    return [
        (n["name"], int(n["pid"])) for n in nodes if n.get("pid") and _ours(int(n["pid"]), marker)
    ]


def _up_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``up``'s options (checked before anything else), or None."""
    if args.fake:
        for given, why in (
            (args.masters != 1, "--masters needs the real cluster (the fake has one master)"),
            (
                args.version is not None,
                "--version needs the real cluster (the fake is no server"
                " release: clients of 1.1.0/1.2.0 framing need FakeCluster(framing=...))",
            ),
            (
                args.web_port is not None,
                "--web-port needs the real cluster (the fake has no web API)",
            ),
        ):
            if given:
                return why
        return None
    version = DEFAULT_VERSION if args.version is None else args.version
    if args.masters != 1 and SERVER_VERSIONS[version].zookeeper:
        return f"--masters needs a 2.x server ({version} runs one master)"
    return None


async def _up(args: argparse.Namespace) -> int:
    from tubemq_aio.testing._cluster import LocalCluster

    problem = _up_problem(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    state = _load()
    if state and _live_pids(state):
        running = "a fake cluster" if _is_fake(state) else "a cluster"
        if _is_fake(state) != args.fake:  # not what was asked for: say so, do not pass
            wanted = "a fake one" if args.fake else "a real one"
            print(
                f"{running} is already running: master {state['master_addr']}; stop it with "
                f"`tubemq-aio cluster down` to start {wanted}",
                file=sys.stderr,
            )
            return 1
        print(f"{running} is already running: master {state['master_addr']} (use `down` first)")
        return 0
    topics = args.topic or [parse_topic("demo:3")]
    if args.fake:
        port = DEFAULT_PORT if args.port is None else args.port
        return await run_fake(topics, port, args.brokers)
    version = DEFAULT_VERSION if args.version is None else args.version
    first_parts = topics[0][1]
    note = _quiet if args.quiet else _say  # progress and notices; the result is always printed
    cluster = LocalCluster(
        args.brokers,
        masters=args.masters,
        version=version,
        topics=[name for name, parts in topics if parts == first_parts],
        topic_partitions=first_parts,
        detached=True,
        master_port=choose_port(args.port, DEFAULT_PORT, "master", note),
        master_web_port=choose_port(args.web_port, DEFAULT_WEB_PORT, "web API", note),
    )
    note("starting TubeMQ (first run downloads the server jars with Maven) ...")
    ticker = asyncio.create_task(progress(cluster, note))
    try:
        await cluster.start()
        for name, parts in topics:
            if parts != first_parts:
                await cluster.create_topic(name, parts)
    except ClusterError as err:
        print(f"cluster failed to start: {err}", file=sys.stderr)
        await cluster.stop(failed=True)
        return 1
    except BaseException:
        await cluster.stop(failed=True)
        raise
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
    info = cluster.describe()
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2), encoding="utf-8")
    for line in up_lines(info, path):
        _say(line)
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _quiet(line: str) -> None:
    """``up -q``: no progress line."""


def _signal(state: dict[str, Any], pid: int, sig: int) -> None:
    if _is_fake(state):  # a foreground process, maybe leading a shell's job: only itself
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    else:
        kill_pid(pid, sig)


def _down() -> int:
    state = _load()
    if state is None:
        print("no cluster state file; nothing to stop")
        return 0
    live = _live_pids(state)
    for _, pid in live:
        _signal(state, pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(pid_alive(pid) for _, pid in live) and time.monotonic() < deadline:
        time.sleep(0.2)
    for _, pid in live:
        if pid_alive(pid):
            _signal(state, pid, signal.SIGKILL)
    work_dir = Path(str(state.get("work_dir", "")))
    if work_dir.name.startswith("tubemq-aio-cluster-"):  # only ever our own temp dir
        shutil.rmtree(work_dir, ignore_errors=True)
    state_file().unlink(missing_ok=True)
    print(f"stopped {', '.join(n for n, _ in live) or 'nothing (already gone)'}")
    return 0


def _status() -> int:
    state = _load()
    if state is None:
        print("no cluster running (no state file)")
        return 1
    live = dict(_live_pids(state))
    for node in state.get("nodes", []):
        up = "running" if node["name"] in live else "STOPPED"
        print(f"{node['name']:9} pid={node['pid']:<8} {node.get('addr', ''):22} {up}")
    print(f"masters={state['master_addr']}  logs={state['log_dir']}")
    return 0 if len(live) == len(state.get("nodes", [])) else 1


def main(
    argv: list[str] | None = None,
    prog: str = "python -m tubemq_aio.testing.cluster",
    *,
    quiet: bool = False,
) -> int:
    """Run the CLI.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).
        prog: The program name shown in usage and help (``tubemq-aio cluster`` reuses this CLI).
        quiet: ``up`` prints no progress lines, only the result (``tubemq-aio -q cluster up``;
            the fake's notice stays).

    Returns:
        Process exit code.
    """
    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    up = sub.add_parser(
        "up",
        help="start a cluster in the background (--fake: an in-memory fake in the foreground)",
    )
    up.add_argument("--brokers", type=int, default=1, choices=(1, 2, 3))
    up.add_argument(
        "--masters",
        type=int,
        default=1,
        choices=(1, 2, 3),
        help="masters in one HA group (BDB-JE replication); 3 survives the loss of any one",
    )
    up.add_argument(
        "--version",
        choices=list(SERVER_VERSIONS),
        help=f"tubemq-server version to run (default {DEFAULT_VERSION}; 1.x servers need "
        "clients with framing='legacy-length')",
    )
    up.add_argument(
        "--topic",
        action="append",
        type=parse_topic,
        help="NAME[:PARTITIONS] to create (default demo:3); repeatable",
    )
    up.add_argument(
        "--fake",
        action="store_true",
        help="no Java: serve the in-memory FakeCluster in this process until Ctrl-C or `down` "
        "(not durable; for trying the SDK and for tests)",
    )
    add_fake_arguments(up)
    sub.add_parser("down", help="stop the cluster started by `up`")
    sub.add_parser("status", help="show the cluster started by `up`")
    args = parser.parse_args(argv)
    args.quiet = quiet
    if args.cmd == "up":
        return asyncio.run(_up(args))
    if args.cmd == "down":
        return _down()
    return _status()
