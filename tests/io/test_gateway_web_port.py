"""A gateway given a master's web port (HTTP, 8080 by default) instead of its client port says
so: the SDK recognises the HTTP answer, and the gateway passes that on in words of its own (no
host named) in a fetch's 503, in ``/readyz`` and when its start-up fails, instead of the
generic "the TubeMQ cluster is unavailable". Real redis-server, a loopback HTTP server as the
"master"."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.gateway_stream_support import READER, serving, stream_config
from tests.support.web_port_server import web_port
from tubemq_aio.errors import FrameError
from tubemq_aio.gateway.app import create_app
from tubemq_aio.gateway.tubemq.web_port import WEB_PORT_HINT, web_port_hint
from tubemq_aio.testing import RedisServer

#: Far above how long the answers take: a gateway that waited for a timeout would exceed it.
_RPC_TIMEOUT = 30.0


async def test_fetch_and_readyz_name_the_web_port(redis_server: RedisServer) -> None:
    async with web_port() as master:
        config = stream_config(
            master,
            redis_server.url,
            [{"name": "gw", "topics": ["t"]}],
            produce_topics=[],  # the producer would not start: see the test below
            rpc_timeout=_RPC_TIMEOUT,
        )
        async with serving(config) as url, httpx.AsyncClient(base_url=url, timeout=60) as c:
            async with asyncio.timeout(_RPC_TIMEOUT / 2):
                r = await c.post("/v1/groups/gw/fetch", json={}, headers=READER)
                ready = await c.get("/readyz")
        assert r.status_code == 503, r.text
        assert r.json()["error"] == {
            "code": "tube_unavailable",
            "message": WEB_PORT_HINT,
            "retriable": True,
        }
        assert master not in r.text  # the client is not told the gateway's hosts
        assert ready.status_code == 503, ready.text
        assert ready.json() == {
            "ready": False,
            "checks": {"redis": True, "master": False},
            "hints": {"master": WEB_PORT_HINT},
        }


async def test_a_start_up_that_met_a_web_port_keeps_why(redis_server: RedisServer) -> None:
    async with web_port() as master:
        config = stream_config(master, redis_server.url, [], produce_topics=["t"])
        app = create_app(config)

        async def start_up() -> None:
            async with asyncio.timeout(_RPC_TIMEOUT / 2), app.router.lifespan_context(app):
                pass

        with pytest.raises(FrameError) as failed:
            await start_up()
        assert web_port_hint(failed.value) == WEB_PORT_HINT
        assert app.state.gateway.start_error is failed.value


def test_only_the_sdks_http_answer_is_taken_for_a_web_port() -> None:
    assert web_port_hint(None) is None
    assert web_port_hint(OSError("connection refused")) is None
    outer = RuntimeError("wrapped")
    outer.__cause__ = ConnectionError("answered in HTTP or HTML")  # the words, not a FrameError
    assert web_port_hint(outer) is None
    outer.__cause__ = FrameError("bad frame begin token; h:1 answered in HTTP or HTML: ...")
    assert web_port_hint(outer) == WEB_PORT_HINT
