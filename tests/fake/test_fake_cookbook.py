"""The FastAPI recipe (``examples/fastapi_service.py``) in process against the fake cluster:
its answers are what a JavaScript client can read (``message_id`` a string, not a number
JavaScript would round)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.example_scripts import load_example
from tubemq_aio.testing import FakeCluster


async def test_fastapi_recipe_answers_message_id_as_a_string(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """201 with the stored message's id as a decimal string; 404 for a topic not configured."""
    async with FakeCluster(topics={"demo": 1}) as cluster:
        monkeypatch.setenv("TUBEMQ_AIO_MASTER", cluster.master_addr)
        monkeypatch.setenv("TUBEMQ_AIO_TOPICS", "demo")
        app = load_example("fastapi_service").app
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
                reply = await client.post("/topics/demo/messages", content=b"hello")
                assert reply.status_code == 201, reply.text
                answer = json.loads(reply.text)
                assert isinstance(answer["message_id"], str)
                (stored,) = cluster.messages("demo")
                assert answer["message_id"] == str(stored.message_id)
                assert answer["partition_key"].endswith(":demo:0")
                missing = await client.post("/topics/other/messages", content=b"x")
                assert missing.status_code == 404
        assert cluster.bodies("demo") == [b"hello"]
