"""``tubemq-gateway dev``: a gateway for development in one command.

It starts a ``redis-server`` of its own (from ``PATH``, in a temporary directory), and with
``--fake`` the in-memory :class:`~tubemq_aio.testing.FakeCluster` instead of a real cluster;
initialises the store, makes one admin API key (printed once), serves, and prints the base URL
on a line of its own. Ctrl-C (SIGINT) or SIGTERM stops the server, Redis and the fake cluster
and removes their files. Everything is on loopback; nothing of it is meant for production:
the Redis keeps the state in a directory that is deleted on exit, and CORS is open to every
origin so that a page served from anywhere may call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import uvicorn

from tubemq_aio.errors import ConfigError, TubeMQError
from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.bootstrap import initialise_store
from tubemq_aio.gateway.config.cors import CorsConfig
from tubemq_aio.gateway.config.gateway_config import GatewayConfig
from tubemq_aio.gateway.config.limits import SHUTDOWN_GRACE_SECONDS
from tubemq_aio.gateway.config.tables import ApiKey, GroupConfig, GroupSpec
from tubemq_aio.gateway.server import GatewayServer
from tubemq_aio.gateway.tubemq.web_port import web_port_hint

__all__ = ["DEV_NOTICE", "REDIS_PACKAGE", "DevOptions", "run_dev"]

#: The Debian/Ubuntu package that provides ``redis-server``.
REDIS_PACKAGE = "redis-server"
DEV_NOTICE = (
    "tubemq-gateway dev: FOR DEVELOPMENT ONLY. It owns a throw-away Redis, one admin key and "
    "CORS open to every origin; run `tubemq-gateway serve` with a config for anything else."
)
#: Partitions of each topic the fake cluster makes.
FAKE_PARTITIONS = 3
#: Seconds the server may take to start (the producer registers at the master first).
START_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DevOptions:
    """What ``tubemq-gateway dev`` was asked for.

    Attributes:
        masters: the TubeMQ master list (``host:port,…``), or None with ``fake``.
        fake: run the in-memory FakeCluster (its topics made ready) instead.
        topics: the topics produced to and read by ``group`` (they must exist on a real
            cluster).
        group: the consumer group served.
        host: the listen address.
        port: the listen port (0: a free one).
        redis_binary: the ``redis-server`` program (a name on ``PATH`` or a path).
        key_file: also write the admin key to this file (mode 0600; removed on exit), for
            scripts; None: only print it.
    """

    masters: str | None
    fake: bool
    topics: tuple[str, ...] = ("demo",)
    group: str = "demo-group"
    host: str = "127.0.0.1"
    port: int = 8080
    redis_binary: str = "redis-server"
    key_file: Path | None = None


class _Server(GatewayServer):
    """A uvicorn server that leaves the signals to :func:`run_dev` (uvicorn's own handler
    re-raises the signal once it stopped, which would cut the clean-up short)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """No signal handling of its own."""
        yield


def dev_config(options: DevOptions, masters: str, redis_url: str, key: str) -> GatewayConfig:
    """The configuration of a dev gateway: every scope for ``key``, one group, open CORS, the
    ``/ui`` page on."""
    return GatewayConfig(
        masters=masters,
        redis=redis_url,
        secret=secrets.token_hex(16),
        produce_topics=options.topics,
        groups=(
            GroupConfig(spec=GroupSpec(name=options.group, topics=options.topics, lease_ms=30_000)),
        ),
        keys=(
            ApiKey(
                name="dev-admin",
                digest=hashlib.sha256(key.encode()).digest(),
                scopes=("produce:*", "consume:*", "admin:*"),
            ),
        ),
        cors=CorsConfig(allow_origins=("*",)),
        produce_timeout=5.0,
        ui=True,
    )


#: A key file as :func:`_write_key` writes it (``secrets.token_urlsafe(24)``), and its size.
_KEY_LINE = re.compile(r"[A-Za-z0-9_-]{32}\n")
_KEY_FILE_MAX = 33

#: Where :func:`check_options` pretends the cluster and Redis are: only the options are checked.
_STAND_IN_MASTERS = "127.0.0.1:8715"
_STAND_IN_REDIS = "redis://127.0.0.1:6379/0"


def check_options(options: DevOptions) -> None:
    """Refuse what the gateway's configuration would refuse (a bad group or topic name, a bad
    master list) before Redis or the fake cluster is started for it, and a ``key_file`` that
    exists but is not a key an earlier dev left (it is overwritten and removed on exit).

    Raises:
        ConfigError: every problem, named as the gateway's configuration names it.
    """
    dev_config(options, options.masters or _STAND_IN_MASTERS, _STAND_IN_REDIS, "")
    path = options.key_file
    if path is not None and (path.exists() or path.is_symlink()) and not _is_key_file(path):
        raise ConfigError(
            f"--key-file {str(path)!r} exists and is not a key file a dev gateway wrote: dev "
            "writes its key there and removes the file on exit; give a new path"
        )


def _is_key_file(path: Path) -> bool:
    """Whether ``path`` is a regular file holding one key as :func:`_write_key` writes it."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _KEY_FILE_MAX:
            return False
        return _KEY_LINE.fullmatch(path.read_text(encoding="ascii", errors="replace")) is not None
    except OSError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _write_key(path: Path, key: str) -> None:
    """Write ``key`` to a new file only its owner may read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(key + "\n")


def _url(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def run_dev(options: DevOptions, out: TextIO | None = None) -> int:
    """Run the dev gateway until SIGINT/SIGTERM; everything started is stopped and removed.

    Args:
        options: what to run.
        out: where its lines go (default: ``sys.stdout`` as it is at the call).

    Returns:
        0 after a signal, 1 when something could not start (the reason on stderr).
    """

    def say(line: str) -> None:
        print(line, file=sys.stdout if out is None else out, flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        say(DEV_NOTICE)
        # the port first, before Redis or a cluster starts: a second dev on a busy port fails
        # before it touches the key file, which belongs to the one already running
        try:
            sock = _listen(options.host, options.port)
        except OSError as err:
            _fail(_unlistenable(options, err))
            return 1
        with contextlib.closing(sock):
            if shutil.which(options.redis_binary) is None:
                _fail(
                    f"{options.redis_binary!r} is not on PATH; install it (Debian/Ubuntu: "
                    f"`sudo apt-get install {REDIS_PACKAGE}`) or put redis-server on PATH"
                )
                return 1
            return await _serve(options, sock, stop, say)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _unlistenable(options: DevOptions, err: OSError) -> str:
    """Why the dev gateway cannot listen where ``options`` say, and what to do instead."""
    where = f"cannot listen on {options.host}:{options.port}"
    if err.errno != errno.EADDRINUSE:
        return f"{where}: {err.strerror or err}"
    return (
        f"{where}: the port is in use (another dev gateway, or the master's web API of a "
        "`tubemq-aio cluster up`, which takes 8080 when it is free); give a free one with "
        "--port PORT or $TUBEMQ_GATEWAY_PORT"
    )


async def _serve(
    options: DevOptions, sock: socket.socket, stop: asyncio.Event, say: Callable[[str], None]
) -> int:
    # imported here: the testing harness is not needed by `serve`
    from tubemq_aio.testing import FakeCluster, RedisServer

    loop_time = asyncio.get_running_loop().time
    async with contextlib.AsyncExitStack() as stack:
        try:
            redis = await stack.enter_async_context(RedisServer(binary=options.redis_binary))
            say(f"redis: {redis.url} (started here; removed on exit)")
            masters = options.masters or ""
            if not options.fake:
                say(f"cluster: the TubeMQ masters {masters}")
            elif not stop.is_set():
                topics = dict.fromkeys(options.topics, FAKE_PARTITIONS)
                cluster = await stack.enter_async_context(FakeCluster(topics=topics))
                masters = cluster.master_addr
                say(f"cluster: the in-memory FakeCluster at {masters} (gone on exit)")
            if stop.is_set():  # a signal during start-up: undo what started, serve nothing
                return 0
            key = secrets.token_urlsafe(24)
            if options.key_file is not None:
                _write_key(options.key_file, key)
                stack.callback(options.key_file.unlink, missing_ok=True)
            config = dev_config(options, masters, redis.url, key)
            await initialise_store(config)
        except (TubeMQError, OSError) as err:
            _fail(f"cannot start: {err}")
            return 1
        app = create_app(config)
        server = _Server(
            uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            )
        )
        serving = asyncio.create_task(_serve_until_exit(server, sock))
        stack.push_async_callback(_stopped, server, serving)
        started = loop_time() + START_TIMEOUT
        while not server.started and not serving.done() and not stop.is_set():
            if loop_time() > started:
                break
            await asyncio.sleep(0.05)
        if not server.started:
            if not stop.is_set():
                _fail(f"the gateway did not start: {_why(app.state.gateway.start_error)}")
            return 0 if stop.is_set() else 1
        say(f"topics: {', '.join(options.topics)}; group: {options.group}")
        say(f"admin key (shown once): {key}")
        say("base URL:")
        say(_url(options.host, sock))
        say("Ctrl-C stops the gateway and removes everything it started.")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        say("stopping ...")
        return 0 if stop.is_set() else 1


async def _serve_until_exit(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve on ``sock``; uvicorn's ``sys.exit`` after a failed start-up (the app's lifespan
    raised, e.g. no master answered; uvicorn logged why) just ends the serving, instead of
    escaping the event loop as a task's ``SystemExit``."""
    with contextlib.suppress(SystemExit):
        await server.serve(sockets=[sock])


async def _stopped(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    server.should_exit = True
    with contextlib.suppress(Exception):
        await serving


def _why(error: BaseException | None) -> str:
    """Why the app did not start, in a few words for the last line."""
    if error is None:
        return "see the log above"
    return web_port_hint(error) or f"{error!r}; the log above has more"


def _fail(text: str) -> None:
    print(f"tubemq-gateway dev: {text}", file=sys.stderr, flush=True)
