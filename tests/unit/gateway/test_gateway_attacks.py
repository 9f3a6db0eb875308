"""Hostile values in every numeric/JSON field of the HTTP API: each is a 422 with the error shape
``{"error": {code, message, retriable}}``, never a 500 (httpx's ASGI transport, no server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.gateway_fakes import FakeEngine, app_client
from tubemq_aio.gateway.engine.data import MAX_OFFSET

#: JSON texts that are neither a valid integer count nor a valid rate.
_NOT_NUMBERS = ['"1"', "true", "NaN", "Infinity", "-Infinity", "-1", "1e400", "[]"]
#: JSON texts that are never a valid integer count/duration/offset here.
BAD_NUMBERS = [
    *_NOT_NUMBERS,
    "1.5",
    str(10**30),
    "1" * 5000,  # over Python's 4300-digit int limit: json.loads raises ValueError
    "{}",
    '"NaN"',
]
BAD_RATES = [*_NOT_NUMBERS, "1e10", "1" * 5000, "null"]
# (method, path, body template); V is replaced by each bad value.
NUMERIC_FIELDS = [
    ("POST", "/v1/groups/g1/fetch", '{"wait_ms": V}'),
    ("POST", "/v1/groups/g1/fetch", '{"lease_ms": V}'),
    ("POST", "/v1/leases/TOKEN/nack", '{"delay_ms": V}'),
    ("POST", "/v1/leases/TOKEN/extend", '{"lease_ms": V}'),
    ("PUT", "/v1/groups/g1/rate", '{"messages_per_second": 1, "burst": V}'),
]
#: Offsets are decimal strings (or integers): these are neither, or out of range.
BAD_OFFSETS = [v for v in BAD_NUMBERS if v != '"1"'] + [
    '"-1"',
    '"+1"',
    '"01"',
    '"1.0"',
    '"1e3"',
    '" 1"',
    '"1 "',
    '""',
    '"0x10"',
    f'"{MAX_OFFSET + 1}"',
    '"' + "1" * 5000 + '"',
    '"١"',  # an Arabic-Indic digit: str.isdigit() says yes
]
OTHER_FIELDS = [
    ("POST", "/v1/groups/gb/fetch", '{"client_id": V}'),
    ("POST", "/v1/groups/g1/fetch", '{"ack": V}'),
    ("POST", "/v1/groups/g1/fetch", '{"value_encoding": V}'),
    ("POST", "/v1/groups/g1/offsets/reset", '{"to": V}'),
    ("POST", "/v1/topics/demo/messages", '{"value": V}'),
    ("POST", "/v1/topics/demo/messages", '{"value": "x", "msg_time": V}'),
    ("POST", "/v1/groups/g1/fetch", "V"),
]
OTHER_VALUES = [
    "1",
    "1.5",
    "true",
    "NaN",
    "Infinity",
    "1" * 5000,
    "[1]",
    '{"a": "x"}',
    "[" * 3000 + "]" * 3000,  # json.loads raises RecursionError: FastAPI answered 400
]


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    engine = FakeEngine({"g1": "clustering", "gb": "broadcast", "other": "clustering"})
    engine.add("1:demo:0", b"a1", b"a2")
    async with app_client(engine) as c:
        r = await c.post("/v1/groups/g1/fetch", json={})
        assert r.status_code == 200, r.text
        yield c, r.json()["lease"]["token"]


def assert_422(r: httpx.Response) -> None:
    assert r.status_code == 422, (r.request.content[:80], r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "retriable"}
    assert body["error"]["retriable"] is False
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


async def send(
    c: httpx.AsyncClient, token: str, method: str, path: str, template: str, value: str
) -> httpx.Response:
    content = template.replace("V", value).encode()
    headers = {"content-type": "application/json"}
    return await c.request(method, path.replace("TOKEN", token), content=content, headers=headers)


@pytest.mark.parametrize(("method", "path", "template"), NUMERIC_FIELDS)
async def test_bad_numbers_are_422(
    client: tuple[httpx.AsyncClient, str], method: str, path: str, template: str
) -> None:
    c, token = client
    for value in BAD_NUMBERS:
        assert_422(await send(c, token, method, path, template, value))


async def test_bad_offsets_are_422(client: tuple[httpx.AsyncClient, str]) -> None:
    c, token = client
    for value in BAD_OFFSETS:
        assert_422(
            await send(
                c, token, "POST", "/v1/groups/g1/offsets/reset", '{"to": {"1:demo:0": V}}', value
            )
        )


async def test_offsets_are_taken_as_strings_or_integers(
    client: tuple[httpx.AsyncClient, str],
) -> None:
    """An offset may be sent as a decimal string (the form answers use) or as an integer;
    both reach the engine as the same int and come back as a string."""
    c, _token = client
    for sent in (str(MAX_OFFSET), MAX_OFFSET, "0", 0):
        r = await c.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": sent}})
        assert r.status_code == 200, r.text
        assert r.json()["partitions"][0]["new"] == str(sent)


async def test_bad_rates_are_422(client: tuple[httpx.AsyncClient, str]) -> None:
    c, token = client
    for value in BAD_RATES:
        r = await send(c, token, "PUT", "/v1/groups/g1/rate", '{"messages_per_second": V}', value)
        assert_422(r)


@pytest.mark.parametrize(("method", "path", "template"), OTHER_FIELDS)
async def test_wrong_types_are_422(
    client: tuple[httpx.AsyncClient, str], method: str, path: str, template: str
) -> None:
    c, token = client
    for value in OTHER_VALUES:
        assert_422(await send(c, token, method, path, template, value))


async def test_offsets_the_store_cannot_hold_exactly_are_422(
    client: tuple[httpx.AsyncClient, str],
) -> None:
    """Offsets over 2**53 - 1 used to reach the store (rounded, or wrapped negative = "no
    committed offset") or crash the JSON encoder (500)."""
    c, _token = client
    for off in (MAX_OFFSET + 1, 2**63 - 1, 2**63, 2**64):
        for sent in (off, str(off)):
            r = await c.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": sent}})
            assert_422(r)
    r = await c.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": MAX_OFFSET}})
    assert r.status_code == 200, r.text


async def test_an_offset_refused_is_named_not_the_other_spelling_of_to(
    client: tuple[httpx.AsyncClient, str],
) -> None:
    """``to`` is ``"earliest"``, ``"latest"`` or ``{partition: offset}``. A bad offset was
    answered with the first branch's error, "body.to.literal['earliest','latest']: Input should
    be 'earliest' or 'latest'", and 20 digits with "an offset must be a string of decimal
    digits": neither said what was wrong. The answer now names the offset and its limit."""
    c, _token = client
    for sent in (MAX_OFFSET + 1, str(MAX_OFFSET + 1), str(2**64)):
        r = await c.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": sent}})
        assert_422(r)
        message = r.json()["error"]["message"]
        assert message == (
            f"body.to.1:demo:0: Input should be less than or equal to {MAX_OFFSET}"
        ), message
    r = await c.post("/v1/groups/g1/offsets/reset", json={"to": {"1:demo:0": "01"}})
    assert r.json()["error"]["message"].startswith("body.to.1:demo:0: Value error, an offset")
    r = await c.post("/v1/groups/g1/offsets/reset", json={"to": "middle"})  # one level: as before
    assert r.json()["error"]["message"] == "body.to: Input should be 'earliest' or 'latest'"


async def test_a_missing_or_unreadable_body_says_so_in_words(
    client: tuple[httpx.AsyncClient, str],
) -> None:
    """A fetch with no body was answered "body: Field required" and a cut JSON text "body.9:
    JSON decode error": framework words that name neither what to send nor where the text
    broke, for a client who never saw pydantic."""
    c, _token = client
    for headers in ({}, {"content-type": "application/json"}):
        r = await c.post("/v1/groups/g1/fetch", headers=headers)
        assert_422(r)
        message = r.json()["error"]["message"]
        assert message == "body: none was sent; send a JSON object ({} for every default)"
    json_type = {"content-type": "application/json"}
    r = await c.post("/v1/topics/demo/messages", content=b'{"value":', headers=json_type)
    assert_422(r)
    assert r.json()["error"]["message"] == "body: not valid JSON at character 9 (Expecting value)"


async def test_a_query_parameter_a_route_does_not_take_is_refused(
    client: tuple[httpx.AsyncClient, str],
) -> None:
    """``POST /v1/groups/g1/fetch?wait_ms=5000`` answered at once: the parameter was ignored
    (a fetch's settings go in its JSON body) and the long poll never happened; so was every
    misspelt query parameter of every route but the stream's."""
    c, token = client
    cases = [
        ("POST", "/v1/groups/g1/fetch?wait_ms=5000", {}, "'wait_ms'; this route takes none: send"),
        ("POST", "/v1/topics/demo/messages?key=k", {"value": "x"}, "'key'; this route takes none"),
        ("POST", f"/v1/leases/{token}/ack?x=1", None, "'x'; this route takes none"),
        ("GET", "/v1/topics?all=1", None, "'all'; this route takes none"),
        ("GET", "/v1/groups/gb/lag?clientid=c1", None, "'clientid'; this route takes client_id"),
    ]
    for method, path, body, words in cases:
        r = await c.request(method, path, json=body)
        assert_422(r)
        assert r.json()["error"]["code"] == "invalid_request", r.text
        assert f"unknown query parameter {words}" in r.json()["error"]["message"], r.text
    r = await c.get("/v1/groups/gb/lag?client_id=c1")  # a parameter the route takes
    assert r.status_code == 200, r.text
    r = await c.post("/v1/groups/g1/fetch", json={})  # no query string: as before
    assert r.status_code == 200, r.text
