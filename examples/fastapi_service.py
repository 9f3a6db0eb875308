"""Cookbook: a FastAPI service that publishes each request body with ``await producer.send``.

One :class:`~tubemq_aio.Producer` per process, opened and closed by the app's lifespan and
shared by every request (it is safe for concurrent use and pipelines the sends). Failures map
to HTTP statuses by what the client can do about them:

* ``TopicUnavailableError`` (no writable partition now): 503 with ``Retry-After``;
* ``SendOutcomeUnknownError`` (written, never answered: maybe stored): 504, the client decides
  whether to retry (a retry may duplicate);
* an invalid message (empty or too big body, bad attribute): 400.

Run it from a clone of the repository (``pip install '.[gateway]'`` brings FastAPI and
uvicorn; the package is not on a package index)::

    export TUBEMQ_AIO_MASTER=127.0.0.1:8715     # as in the quickstart
    TUBEMQ_AIO_TOPICS=demo uvicorn fastapi_service:app --app-dir examples

The answer carries ``message_id`` as a JSON string: ids are 64-bit and JavaScript's numbers
(doubles) would round them.

Settings come from the environment: ``TUBEMQ_AIO_MASTER`` (required; the variable the
command-line tool reads too), ``TUBEMQ_AIO_TOPICS`` (the topics clients may publish to,
comma-separated), ``TUBEMQ_AIO_SEND_TIMEOUT`` and ``TUBEMQ_AIO_PUBLISH_TIMEOUT`` (seconds).
Guide: ``docs/cookbook/fastapi.md``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request

from tubemq_aio import ConfigError, Producer, SendOutcomeUnknownError, TopicUnavailableError

#: Seconds a client should wait before retrying a 503.
RETRY_AFTER = 2


def _settings() -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, env in (
        ("send_timeout", "TUBEMQ_AIO_SEND_TIMEOUT"),
        ("publish_timeout", "TUBEMQ_AIO_PUBLISH_TIMEOUT"),
    ):
        if os.environ.get(env):
            options[name] = float(os.environ[env])
    return options


def _allowed_topics() -> frozenset[str]:
    return frozenset(t for t in os.environ.get("TUBEMQ_AIO_TOPICS", "").split(",") if t)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the process's one producer before serving; close it (flushing sends) after."""
    master = os.environ.get("TUBEMQ_AIO_MASTER")
    if not master:
        raise RuntimeError("set TUBEMQ_AIO_MASTER to the TubeMQ master's HOST:PORT")
    async with Producer(master, **_settings()) as producer:
        app.state.producer = producer
        app.state.topics = _allowed_topics()
        yield


app = FastAPI(title="tubemq-aio publishing service", lifespan=lifespan)


@app.post("/topics/{topic}/messages", status_code=201)
async def publish(topic: str, request: Request) -> dict[str, Any]:
    """Publish the request body as one message; ``X-Msg-Type`` sets its type.

    Returns:
        Where the broker stored it: ``partition_key`` and ``message_id`` (a decimal string).
    """
    if topic not in request.app.state.topics:
        raise HTTPException(404, f"unknown topic {topic!r}")
    producer: Producer = request.app.state.producer
    try:
        result = await producer.send(
            topic, await request.body(), msg_type=request.headers.get("x-msg-type")
        )
    except TopicUnavailableError as err:
        raise HTTPException(503, str(err), headers={"Retry-After": str(RETRY_AFTER)}) from None
    except SendOutcomeUnknownError as err:
        raise HTTPException(504, f"outcome unknown: {err}") from None
    except ConfigError as err:  # an invalid message: nothing was sent
        raise HTTPException(400, str(err)) from None
    return {"partition_key": result.partition_key, "message_id": str(result.message_id)}


@app.get("/healthz")
async def healthz(request: Request) -> dict[str, Any]:
    """Liveness plus the producer's counters."""
    producer: Producer = request.app.state.producer
    return {"in_flight": producer.in_flight, "sent": producer.sent, "failed": producer.failed}
