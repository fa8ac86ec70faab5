"""POST /api/v1/check over HTTP: the write API's auth (bearer token, named tokens), limits, strict JSON with a
400 naming the field, 404 naming the guarded suites, security headers, and the OpenAPI document; in the
guard's own app and as a feature of the worker's app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _guard_helpers import raw, support_suite
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import Identities, create_web_app, openapi_document
from streameval.api._security import HEADERS
from streameval.config import parse_config
from streameval.features.guard._check import Guard
from streameval.features.guard._web import guard_app, guard_feature

TOKEN = "guard-test-token-0123456789"
CALLER = "chat-frontend-token-0123456789"
REVIEWER = "a-reviewer-token-0123456789"
IDENTITIES = Identities((("api", TOKEN), ("chat", CALLER)))
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SUITES = [
    support_suite({}),
    {"name": "billing", "match": {"category": ["billing"]}, "evaluators": [{"evaluator": "exact_match"}]},
]


def _guard(**limits: Any) -> Guard:
    _, loaded = parse_config({"suites": SUITES})
    return Guard(loaded, **limits)


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    guard = _guard(max_body_bytes=4096, max_text_chars=500)
    await guard.start()
    async with TestClient(TestServer(guard_app(guard, IDENTITIES))) as c:
        yield c
    await guard.close()


async def _post(
    client: TestClient[Any, Any], body: bytes, headers: dict[str, str] | None = None, **kw: Any
) -> tuple[int, Any]:
    response = await client.post(
        "/api/v1/check", data=body, headers=AUTH if headers is None else headers, **kw
    )
    return response.status, orjson.loads(await response.read())


async def test_a_check_answers_its_decision(client: TestClient[Any, Any]) -> None:
    status, body = await _post(client, raw("Order ORD-7 ships", id="c1"))
    assert status == 200 and body["code"] == 200
    assert body["data"]["decision"] == "allow" and body["data"]["id"] == "c1"
    status, body = await _post(client, raw("Card 4111 1111 1111 1111, ORD-7"))
    assert status == 200 and body["data"]["decision"] == "block"
    assert body["data"]["reasons"][0].startswith("no_card failed")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-token-0123456789"}, 401),
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        ({"Authorization": f"Bearer {REVIEWER}"}, 401),
        ({"Authorization": f"Bearer {CALLER}"}, 200),
        (AUTH, 200),
    ],
)
async def test_the_write_apis_auth_with_named_tokens(
    client: TestClient[Any, Any], headers: dict[str, str], status: int
) -> None:
    got, body = await _post(client, raw("ORD-1"), headers)
    assert got == status, body
    if status == 401:
        response = await client.post("/api/v1/check", data=raw("ORD-1"), headers=headers)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_without_any_token_every_check_is_refused() -> None:
    guard = _guard()
    async with TestClient(TestServer(guard_app(guard, Identities()))) as c:
        status, body = await _post(c, raw("ORD-1"), {})
    assert status == 403 and "STREAMEVAL_GUARD_TOKENS_FILE" in body["message"]


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (b'{"model": "m", "output": "a", "output": "b"}', "$", "duplicate key 'output'"),
        (b'{"model": "m", "output": "a", "metadata": {"x": NaN}}', "$", "NaN"),
        (
            b'{"model": "m", "output": "a", "metadata": ' + b"[" * 65 + b"]" * 65 + b"}",
            "$",
            "nested 66 levels",
        ),
        (b'{"model": "m", "output": 3}', "$.output", "valid string"),
        (b'{"model": "m", "output": "' + b"x" * 501 + b'"}', "$.output", "longer than 500 characters"),
        (b"not json", "$", "not strict JSON"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    client: TestClient[Any, Any], body: bytes, path: str, message: str
) -> None:
    status, answer = await _post(client, body)
    assert status == 400 and answer["code"] == 400
    assert any(e["path"] == path and message in e["message"] for e in answer["data"]["errors"]), answer


async def test_a_body_over_the_limit_is_a_413(client: TestClient[Any, Any]) -> None:
    status, answer = await _post(client, raw("ORD-1", metadata={"pad": "z" * 5000}))
    assert status == 413 and answer["code"] == 413


async def test_no_guarded_suite_is_a_404_naming_the_suites(client: TestClient[Any, Any]) -> None:
    status, answer = await _post(client, raw("ORD-1"), params={"suite": "nope"})
    assert status == 404 and "valid suites: support" in answer["message"]
    assert answer["data"] == {"suites": ["support"]}
    status, answer = await _post(client, raw("ORD-1", category="billing"))
    assert status == 404 and "suite 'billing' has no guard: section" in answer["message"]


async def test_security_headers_and_other_routes(client: TestClient[Any, Any]) -> None:
    response = await client.post("/api/v1/check", data=raw("ORD-1"), headers=AUTH)
    for name, value in HEADERS.items():
        assert response.headers[name] == value
    assert (await client.get("/health")).status == 200
    assert (await client.get("/api/v1/check")).status == 405
    document = await (await client.get("/api/v1/openapi.json")).json()
    assert list(document["paths"]) == ["/api/v1/check"]


async def test_nothing_is_logged_with_the_output_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="streameval.guard")
    secret = "ORD-1 the very private answer"
    await _guard().check(raw(secret))
    assert caplog.records and secret not in caplog.text
    caplog.clear()
    _, loaded = parse_config({"suites": SUITES})
    await Guard(loaded, log_texts=True).check(raw(secret))
    assert secret in caplog.text


async def test_the_worker_app_serves_the_check_with_the_same_auth(
    aredis: aioredis.Redis, prefix: str
) -> None:
    guard = _guard()
    await guard.start()
    app = create_web_app(aredis, prefix=prefix, token=TOKEN, features=[guard_feature(guard, IDENTITIES)])
    async with TestClient(TestServer(app)) as c:
        status, body = await _post(c, raw("ORD-1"), {"Authorization": f"Bearer {CALLER}"})
        assert status == 200 and body["data"]["decision"] == "allow"
        status, _ = await _post(c, raw("ORD-1"), {})
        assert status == 401
        document = await (await c.get("/api/v1/openapi.json")).json()
        assert "/api/v1/check" in document["paths"]
    assert "/api/v1/check" not in openapi_document()["paths"]


async def test_an_empty_suite_parameter_is_a_400(client: TestClient[Any, Any]) -> None:
    status, answer = await _post(client, raw("ORD-1"), params={"suite": ""})
    assert status == 400 and answer["data"]["errors"][0]["path"] == "$.query.suite"
