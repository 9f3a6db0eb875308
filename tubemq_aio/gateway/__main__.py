"""``python -m tubemq_aio.gateway [serve|init] --config gateway.toml [--host H] [--port P]
[--workers N]``.

Each worker process is one replica; replicas share only Redis. ``init`` writes the store's boot
markers once, before the first replica starts (a replica never does: see :mod:`.bootstrap`).
``--openapi`` prints the OpenAPI document and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence

from fastapi import FastAPI

from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway.app import create_app, openapi_document
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.config import GatewayConfig
from tubemq_aio.gateway.errors import GatewayError
from tubemq_aio.gateway.heap import freeze_startup_heap

__all__ = ["app_from_env", "main"]

CONFIG_ENV = "TUBEMQ_GATEWAY_CONFIG"
LOG_LEVEL_ENV = "TUBEMQ_GATEWAY_LOG_LEVEL"


def app_from_env() -> FastAPI:
    """The app of one worker, built from the file named by ``TUBEMQ_GATEWAY_CONFIG``.

    The gateway's own log lines (the replica id at start, the details that error answers
    withhold) go to stderr at ``TUBEMQ_GATEWAY_LOG_LEVEL`` (the server's ``--log-level``),
    unless the process configured the ``tubemq_aio`` logger already. What the worker holds
    once the app is built is exempted from later garbage collections
    (:func:`~tubemq_aio.gateway.heap.freeze_startup_heap`).
    """
    _log_to_stderr(os.environ.get(LOG_LEVEL_ENV, "info"))
    app = create_app(GatewayConfig.from_toml(os.environ[CONFIG_ENV]))
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
        prog="tubemq-gateway", description="HTTP gateway for TubeMQ (consume state in Redis)."
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=("serve", "init"),
        default="serve",
        help="serve (default), or init: mark the Redis store initialised, once, before the "
        "first replica starts",
    )
    parser.add_argument("--config", help="the gateway TOML file")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="listen port (default 8080)")
    parser.add_argument("--workers", type=int, default=1, help="replica processes (default 1)")
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
    parser.add_argument("--openapi", action="store_true", help="print the OpenAPI JSON and exit")
    return parser


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
    if not args.config:
        print("tubemq-gateway: --config is required", file=sys.stderr)
        return 2
    if not 1 <= args.workers <= 256 or not 0 <= args.port <= 65535:
        print("tubemq-gateway: --workers must be 1-256 and --port 0-65535", file=sys.stderr)
        return 2
    try:
        config = GatewayConfig.from_toml(args.config)  # refuse a bad file before any worker
    except ConfigError as err:
        print(f"tubemq-gateway: {err}", file=sys.stderr)
        return 2
    if args.command == "init":
        return _init(config)
    import uvicorn  # imported late: --openapi and config checks need no server

    os.environ[CONFIG_ENV] = os.path.abspath(args.config)
    os.environ[LOG_LEVEL_ENV] = args.log_level
    uvicorn.run(
        "tubemq_aio.gateway.__main__:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        access_log=False,
    )
    return 0


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
