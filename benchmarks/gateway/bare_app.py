"""The framework floor: a bare FastAPI app whose POST handler reads the body and answers a small
JSON object (no auth, no body model, no middleware). ``make bench-gateway`` serves it with the
same uvicorn setup as the gateway (uvloop, httptools, one worker) and compares against it."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

app = FastAPI()
_ANSWER = b'{"partition_key":"0:bare:0","message_id":"0","append_time":0,"append_offset":"0"}'


@app.post("/bare")
async def bare(request: Request) -> Response:
    """Read the whole body, answer a fixed JSON object."""
    await request.body()
    return Response(_ANSWER, media_type="application/json")
