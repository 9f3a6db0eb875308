"""``tubemq-gateway [serve|init|check|dev] [--config gateway.toml] [--host H] [--port P]
[--workers N]``, ``tubemq-gateway --version``.

Each worker process is one replica; replicas share only Redis. ``init`` writes the store's boot
markers once, before the first replica starts (a replica never does: see :mod:`.bootstrap`).
``check`` validates the configuration and prints it as it takes effect, secrets masked.
``dev`` runs a development gateway in one command (see :mod:`.dev`). ``--openapi`` prints the
OpenAPI document and exits. Settings come from the flags, then the environment
(``TUBEMQ_GATEWAY_*``), then the file, then the defaults (see :mod:`.config.sources`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from fastapi import FastAPI

from tubemq_aio import __version__
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.app import create_app, openapi_document
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.limits import SHUTDOWN_GRACE_SECONDS
from tubemq_aio.gateway.config.report import render_config
from tubemq_aio.gateway.config.sources import CONFIG_ENV, ENV_PREFIX, gather_sources
from tubemq_aio.gateway.errors import GatewayError
from tubemq_aio.gateway.heap import freeze_startup_heap

__all__ = ["app_from_env", "main"]

LOG_LEVEL_ENV = ENV_PREFIX + "LOG_LEVEL"
#: The server's own settings: flag -> (variable, default).
_SERVER_SETTINGS = {
    "host": (ENV_PREFIX + "HOST", "127.0.0.1"),
    "port": (ENV_PREFIX + "PORT", "8080"),
    "workers": (ENV_PREFIX + "WORKERS", "1"),
}
#: The inclusive bounds of the numeric server settings.
_SERVER_RANGES = {"port": (0, 65535), "workers": (1, 256)}


def app_from_env() -> FastAPI:
    """The app of one worker, built from the file named by ``TUBEMQ_GATEWAY_CONFIG`` (if
    any) and the ``TUBEMQ_GATEWAY_*`` variables.

    The gateway's own log lines (the replica id at start, the details that error answers
    withhold) go to stderr at ``TUBEMQ_GATEWAY_LOG_LEVEL`` (the server's ``--log-level``),
    unless the process configured the ``tubemq_aio`` logger already. What the worker holds
    once the app is built is exempted from later garbage collections
    (:func:`~tubemq_aio.gateway.heap.freeze_startup_heap`).
    """
    _log_to_stderr(os.environ.get(LOG_LEVEL_ENV, "info"))
    app = create_app(GatewayConfig.load(os.environ.get(CONFIG_ENV), os.environ))
    freeze_startup_heap()  # the server's own process: what it holds now lives as long as it
    return app


def _log_to_stderr(level_name: str) -> None:
    logger = logging.getLogger("tubemq_aio")
    if logger.handlers:
        return
    level = logging.getLevelName(level_name.upper())
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level if isinstance(level, int) else logging.INFO)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tubemq-gateway",
        description="HTTP gateway for TubeMQ (consume state in Redis). Settings: flags, then "
        f"{ENV_PREFIX}* variables, then the --config file, then the defaults.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=("serve", "init", "check", "dev"),
        default="serve",
        help="serve (default); init: mark the Redis store initialised, once, before the "
        "first replica starts; check: validate and print the effective configuration, "
        "secrets masked; dev: a development gateway with its own Redis (--masters or --fake)",
    )
    parser.add_argument("--version", action="version", version=f"tubemq-gateway {__version__}")
    parser.add_argument("--config", help=f"the gateway TOML file (or ${CONFIG_ENV})")
    parser.add_argument("--host", help=f"listen address (${ENV_PREFIX}HOST; default 127.0.0.1)")
    parser.add_argument("--port", type=int, help=f"listen port (${ENV_PREFIX}PORT; default 8080)")
    parser.add_argument(
        "--workers", type=int, help=f"replica processes (${ENV_PREFIX}WORKERS; default 1)"
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
    parser.add_argument("--openapi", action="store_true", help="print the OpenAPI JSON and exit")
    dev = parser.add_argument_group("dev")
    dev.add_argument(  # --master as the SDK's CLI spells it
        "--masters",
        "--master",
        dest="masters",
        help=f"dev: the TubeMQ masters (or ${ENV_PREFIX}MASTERS)",
    )
    dev.add_argument("--fake", action="store_true", help="dev: the in-memory FakeCluster")
    dev.add_argument("--topic", action="append", help="dev: a topic to serve (default demo)")
    dev.add_argument("--group", help="dev: the group (default demo-group)")
    dev.add_argument("--key-file", help="dev: also write the admin key to this file (0600)")
    return parser


def _server_settings(
    args: argparse.Namespace, env: Mapping[str, str]
) -> tuple[str, int, int] | str:
    """``(host, port, workers)`` from the flags, else the environment, else the defaults; or
    the text of what is wrong."""
    values: dict[str, str] = {}
    for flag, (variable, default) in _SERVER_SETTINGS.items():
        given = getattr(args, flag)
        values[flag] = str(given) if given is not None else env.get(variable, default)
    numbers: dict[str, int] = {}
    problems: list[str] = []
    for flag, (low, high) in _SERVER_RANGES.items():
        where = f"--{flag}" if getattr(args, flag) is not None else _SERVER_SETTINGS[flag][0]
        try:
            numbers[flag] = int(values[flag])
        except ValueError:
            problems.append(f"{where}: {values[flag]!r} is not an integer")
            continue
        if not low <= numbers[flag] <= high:
            problems.append(f"{where} must be {low}-{high}, got {numbers[flag]}")
    if problems:
        return "; ".join(problems)
    return values["host"], numbers["port"], numbers["workers"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gateway (blocks until stopped).

    Returns:
        The process exit status.
    """
    args = _parser().parse_args(argv)
    if args.openapi:
        json.dump(openapi_document(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    env = os.environ
    server = _server_settings(args, env)
    if isinstance(server, str):
        print(f"tubemq-gateway: {server}", file=sys.stderr)
        return 2
    host, port, workers = server
    misplaced = _misplaced(args)
    if misplaced is not None:
        print(f"tubemq-gateway: {misplaced}", file=sys.stderr)
        return 2
    if args.command == "dev":
        return _dev(args, env, host, port)
    path = args.config or env.get(CONFIG_ENV)
    try:
        sources = gather_sources(path, env, GatewayConfig)
        config = GatewayConfig.from_mapping(sources.data)  # refuse bad settings before a worker
    except ConfigError as err:
        print(f"tubemq-gateway: {err}", file=sys.stderr)
        return 2
    if args.command == "check":
        sys.stdout.write(render_config(config, sources.origins))
        return 0
    if args.command == "init":
        return _init(config)
    import uvicorn  # imported late: --openapi and config checks need no server

    if path is not None:
        os.environ[CONFIG_ENV] = os.path.abspath(path)
    os.environ[LOG_LEVEL_ENV] = args.log_level
    server_config = uvicorn.Config(
        "tubemq_aio.gateway.__main__:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    if server_config.workers > 1:  # as uvicorn.run: its supervisor runs a plain server per worker
        from uvicorn.supervisors import Multiprocess

        Multiprocess(server_config, sockets=[server_config.bind_socket()]).run()
        return 0
    from tubemq_aio.gateway.server import GatewayServer  # drains long polls and streams

    replica = GatewayServer(server_config)
    with contextlib.suppress(KeyboardInterrupt):
        replica.run()
    return 0 if replica.started else 3  # uvicorn's status for a server that did not start


#: The flags only ``dev`` takes.
_DEV_FLAGS = ("masters", "fake", "topic", "group", "key_file")


def _misplaced(args: argparse.Namespace) -> str | None:
    """Why a flag does not belong to the command (it used to be ignored), or None: ``--fake``
    without ``dev`` asked for a config's ``masters``, ``redis`` and ``secret`` instead, and
    ``dev --workers 4`` ran one replica."""
    if args.command == "dev":
        if args.workers not in (None, 1):
            return "dev runs one replica: --workers is for serve"
        return None
    given = [f"--{name.replace('_', '-')}" for name in _DEV_FLAGS if getattr(args, name)]
    if given == ["--masters"]:  # the masters of serve, check and init are a setting, not a flag
        return (
            f"--masters: only `tubemq-gateway dev` takes it; {args.command} reads the masters "
            f"from ${ENV_PREFIX}MASTERS or `masters` in the --config file (e.g. "
            f"{ENV_PREFIX}MASTERS=HOST:8715 tubemq-gateway {args.command} --config gw.toml)"
        )
    if given:
        return (
            f"{', '.join(given)}: only `tubemq-gateway dev` takes "
            f"{'it' if len(given) == 1 else 'them'} (did you mean `tubemq-gateway dev "
            f"{' '.join(given)} ...`?)"
        )
    return None


def _dev(args: argparse.Namespace, env: Mapping[str, str], host: str, port: int) -> int:
    from tubemq_aio.gateway.dev import (  # imports the testing harness
        DevOptions,
        check_options,
        run_dev,
    )

    masters = None if args.fake else args.masters or env.get(ENV_PREFIX + "MASTERS")
    if (masters is None) != args.fake or (args.fake and args.masters):
        given = "both were given" if args.fake else "neither was given"
        print(f"tubemq-gateway dev: give --masters HOST:PORT or --fake ({given})", file=sys.stderr)
        return 2
    options = DevOptions(
        masters=masters,
        fake=args.fake,
        topics=tuple(dict.fromkeys(args.topic or ("demo",))),  # a topic given twice is one
        group="demo-group" if args.group is None else args.group,
        host=host,
        port=port,
        key_file=Path(args.key_file) if args.key_file else None,
    )
    try:
        check_options(options)
        return asyncio.run(run_dev(options))
    except ConfigError as err:
        print(f"tubemq-gateway dev: {err}", file=sys.stderr)
        return 2


def _init(config: GatewayConfig) -> int:
    try:
        was_booted, groups = asyncio.run(initialise_store(config))
    except GatewayError as err:
        print(f"tubemq-gateway: init failed: {err}", file=sys.stderr)
        return 1
    if not groups:
        print("tubemq-gateway: no [[groups]] configured: the gateway uses no Redis store")
        return 0
    state = "was already initialised" if was_booted else "initialised"
    print(f"tubemq-gateway: the Redis store {state}; groups marked: {', '.join(groups) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
