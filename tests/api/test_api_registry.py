"""The evaluator registry API (the evaluator-module spec §5, §9) against a real Redis: every route and error code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.api._evaluators import SEED_PRESETS, preset_names
from streameval.evaluators import evaluator_names

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "/api/v1/evaluators"

NODE_CODE = """module.exports = async function evaluate(input, output, expected, metadata) {
  const min = metadata.minLength || 5;
  return { passed: output.length >= min, score: Math.min(1, output.length / min), reason: `len ${output.length}` };
};"""
PY_CODE = "def evaluate(input, output, expected, metadata):\n    return {'passed': output == expected, 'reason': 'py'}\n"


@pytest.fixture
async def client(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[TestClient[Any, Any]]:
    app = create_web_app(aredis, prefix=prefix, token=TOKEN)
    async with TestClient(TestServer(app)) as c:
        yield c


async def create(
    client: TestClient[Any, Any], name: str = "min_len", code: str = NODE_CODE, language: str = "nodejs"
) -> dict[str, Any]:
    body = {"name": name, "description": "d", "type": "code", "config": {"language": language, "code": code}}
    resp = await client.post(BASE, json=body, headers=AUTH)
    assert resp.status == 201, await resp.text()
    payload = await resp.json()
    assert payload["code"] == 200
    return payload["data"]  # type: ignore[no-any-return]


async def test_presets_are_the_builtin_registry_seed_five_first(client: TestClient[Any, Any]) -> None:
    resp = await client.get(f"{BASE}/presets")
    assert resp.status == 200
    data = (await resp.json())["data"]
    names = [p["name"] for p in data]
    assert names[:5] == list(SEED_PRESETS)
    assert set(names) == set(evaluator_names()) - {"code", "registered"} - {
        n for n in evaluator_names() if n.startswith("test_")
    }
    regex = next(p for p in data if p["id"] == "regex")
    assert regex["type"] == "preset" and regex["isPreset"] is True
    assert regex["config"]["presetType"] == "regex"
    assert "pattern" in regex["paramsSchema"]["properties"]
    similarity = next(p for p in data if p["id"] == "similarity")
    assert similarity["config"]["params"]["threshold"] == 0.8  # the evaluator-module spec §3.5 default


async def test_crud_round_trip_and_type_filter(client: TestClient[Any, Any]) -> None:
    created = await create(client)
    assert created["isPreset"] is False and created["type"] == "code" and created["version"] == 1
    assert created["config"] == {
        "language": "nodejs",
        "code": NODE_CODE,
        "timeout": 5000,
    }  # the evaluator-module spec: 5000 ms

    got = (await (await client.get(f"{BASE}/{created['id']}")).json())["data"]
    assert got == created

    listed = (await (await client.get(BASE, params={"type": "code"})).json())["data"]
    assert [e["id"] for e in listed] == [created["id"]]
    assert listed[0]["language"] == "nodejs" and "config" not in listed[0]
    presets_only = (await (await client.get(BASE, params={"type": "preset"})).json())["data"]
    assert all(e["isPreset"] for e in presets_only) and len(presets_only) == len(preset_names())
    everything = (await (await client.get(BASE)).json())["data"]
    assert len(everything) == len(preset_names()) + 1
    assert (await (await client.get(BASE, params={"type": "llm"})).json())["data"] == []

    resp = await client.put(
        f"{BASE}/{created['id']}", json={"name": "renamed", "description": None}, headers=AUTH
    )
    updated = (await resp.json())["data"]
    assert resp.status == 200 and updated["name"] == "renamed" and updated["description"] is None
    assert updated["version"] == 2 and updated["createdAt"] == created["createdAt"]
    assert updated["config"] == created["config"]

    resp = await client.delete(f"{BASE}/{created['id']}", headers=AUTH)
    assert resp.status == 200 and (await resp.json())["data"] == {"id": created["id"], "deleted": True}
    resp = await client.get(f"{BASE}/{created['id']}")
    assert resp.status == 404 and (await resp.json())["code"] == 503001


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{BASE}/nope"),
        ("put", f"{BASE}/nope"),
        ("delete", f"{BASE}/nope"),
        ("post", f"{BASE}/nope/test"),
    ],
)
async def test_unknown_id_is_503001(client: TestClient[Any, Any], method: str, path: str) -> None:
    body = {"output": "x"} if path.endswith("/test") else ({"name": "x"} if method == "put" else None)
    resp = await client.request(method, path, json=body, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 404 and payload["code"] == 503001 and "nope" in payload["message"]


@pytest.mark.parametrize("method", ["put", "delete"])
@pytest.mark.parametrize("preset", SEED_PRESETS)
async def test_presets_cannot_be_changed(client: TestClient[Any, Any], method: str, preset: str) -> None:
    resp = await client.request(
        method, f"{BASE}/{preset}", json={"name": "x"} if method == "put" else None, headers=AUTH
    )
    payload = await resp.json()
    assert resp.status == 403 and payload["code"] == 403 and "preset" in payload["message"]
    assert (await client.get(f"{BASE}/{preset}")).status == 200


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        (AUTH, 201),
    ],
)
async def test_writes_need_the_bearer_token(
    client: TestClient[Any, Any], headers: dict[str, str], status: int
) -> None:
    body = {"name": "a", "type": "code", "config": {"language": "python", "code": PY_CODE}}
    resp = await client.post(BASE, json=body, headers=headers)
    assert resp.status == status
    if status == 401:
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await client.get(BASE, params={"type": "code"})).status == 200  # reads stay open


async def test_without_a_configured_token_writes_are_refused(aredis: aioredis.Redis, prefix: str) -> None:
    async with TestClient(TestServer(create_web_app(aredis, prefix=prefix, token=None))) as c:
        resp = await c.post(BASE, json={}, headers=AUTH)
        assert resp.status == 403 and "STREAMEVAL_API_TOKEN" in (await resp.json())["message"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"type": "code", "config": {"language": "python", "code": PY_CODE}}, "$.name"),
        ({"name": "", "type": "code", "config": {"language": "python", "code": PY_CODE}}, "$.name"),
        ({"name": "a", "type": "code", "config": {"language": "ruby", "code": PY_CODE}}, "$.config.language"),
        (
            {"name": "a", "type": "code", "config": {"language": "python", "code": PY_CODE, "timeout": 0}},
            "$.config.timeout",
        ),
        ({"name": "a", "type": "code", "config": {"language": "python", "code": "x = 1"}}, "$.config.code"),
        (
            {"name": "a", "type": "code", "config": {"language": "nodejs", "code": "module.exports = ("}},
            "$.config.code",
        ),
        (
            {"name": "a", "type": "code", "config": {"language": "python", "code": PY_CODE}, "extra": 1},
            "$.extra",
        ),
        ({"name": "a", "type": "llm", "config": {}}, "$.type"),
        ({"name": "a", "type": "composite", "config": {}}, "$.type"),
        ([1, 2], "$"),
    ],
)
async def test_create_validation_is_a_clear_400(client: TestClient[Any, Any], body: Any, path: str) -> None:
    resp = await client.post(BASE, json=body, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 400 and payload["code"] == 400, payload
    assert path in [e["path"] for e in payload["data"]["errors"]], payload


async def test_body_that_is_not_json_is_400(client: TestClient[Any, Any]) -> None:
    resp = await client.post(BASE, data=b"{nope", headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status == 400 and "not valid JSON" in (await resp.json())["message"]


async def test_body_over_the_limit_is_413(client: TestClient[Any, Any]) -> None:
    body = {"name": "big", "type": "code", "config": {"language": "python", "code": "#" * 600_000}}
    resp = await client.post(BASE, json=body, headers=AUTH)
    assert resp.status == 413 and (await resp.json())["code"] == 413


async def test_names_are_unique_and_not_builtin(client: TestClient[Any, Any]) -> None:
    first = await create(client, "dup", PY_CODE, "python")
    body = {"name": "dup", "type": "code", "config": {"language": "python", "code": PY_CODE}}
    assert (await client.post(BASE, json=body, headers=AUTH)).status == 409
    assert (await client.post(BASE, json={**body, "name": "regex"}, headers=AUTH)).status == 409
    second = await create(client, "other", PY_CODE, "python")
    resp = await client.put(f"{BASE}/{second['id']}", json={"name": "dup"}, headers=AUTH)
    assert resp.status == 409 and (await resp.json())["code"] == 409
    # renaming frees the old name
    assert (await client.put(f"{BASE}/{first['id']}", json={"name": "dup2"}, headers=AUTH)).status == 200
    assert (await client.put(f"{BASE}/{second['id']}", json={"name": "dup"}, headers=AUTH)).status == 200


@pytest.mark.parametrize(
    "body", [{}, {"type": "llm"}, {"config": {"language": "python", "code": "x=1"}}, {"bogus": 1}]
)
async def test_update_validation(client: TestClient[Any, Any], body: dict[str, Any]) -> None:
    created = await create(client, "u", PY_CODE, "python")
    resp = await client.put(f"{BASE}/{created['id']}", json=body, headers=AUTH)
    assert resp.status == 400 and (await resp.json())["code"] == 400


async def test_list_rejects_an_unknown_type(client: TestClient[Any, Any]) -> None:
    resp = await client.get(BASE, params={"type": "rule"})
    assert resp.status == 400 and "$.query.type" in str(await resp.json())


@pytest.mark.parametrize(
    ("evaluator", "body", "passed", "score"),
    [
        (
            "exact_match",
            {"input": "北京是哪个国家的首都？", "output": "中国", "expected": "中国"},
            True,
            1.0,
        ),  # the evaluator-module spec §3.1
        (
            "contains",
            {"output": "北京是中国的首都，有着悠久的历史...", "expected": "首都"},
            True,
            1.0,
        ),  # the evaluator-module spec §3.2
        ("regex", {"output": "2026-11-21", "params": {"pattern": r"^\d{4}-\d{2}-\d{2}$"}}, True, 1.0),
        ("regex", {"output": "ABC", "params": {"pattern": "abc", "flags": "i"}}, True, 1.0),
        (
            "similarity",
            {"output": "kitten", "expected": "sitting", "params": {"threshold": 0.5}},
            True,
            1 - 3 / 7,
        ),
    ],
)
async def test_test_run_presets(
    client: TestClient[Any, Any], evaluator: str, body: dict[str, Any], passed: bool, score: float
) -> None:
    resp = await client.post(f"{BASE}/{evaluator}/test", json=body, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 200 and payload["code"] == 200, payload
    data = payload["data"]
    assert data["passed"] is passed and data["score"] == pytest.approx(score)
    assert data["error"] is None and data["latencyMs"] >= 0


@pytest.mark.parametrize(
    ("evaluator", "body", "path"),
    [
        ("regex", {"output": "x"}, "$.params.pattern"),
        ("regex", {"output": "x", "params": {"pattern": "("}}, "$.params"),
        ("exact_match", {"output": "x", "params": {"nope": 1}}, "$.params.nope"),
        ("exact_match", {}, "$.output"),
        ("exact_match", {"output": 3}, "$.output"),
    ],
)
async def test_test_run_validation(
    client: TestClient[Any, Any], evaluator: str, body: dict[str, Any], path: str
) -> None:
    resp = await client.post(f"{BASE}/{evaluator}/test", json=body, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 400 and path in [e["path"] for e in payload["data"]["errors"]], payload


async def test_test_run_custom_code_both_languages(client: TestClient[Any, Any]) -> None:
    node = await create(client, "node", NODE_CODE, "nodejs")
    resp = await client.post(
        f"{BASE}/{node['id']}/test", json={"output": "abc", "metadata": {"minLength": 4}}, headers=AUTH
    )
    data = (await resp.json())["data"]
    assert resp.status == 200 and data["passed"] is False and data["score"] == pytest.approx(0.75)
    assert data["reason"] == "len 3" and data["version"] == f"{node['id']}@1"
    py = await create(client, "py", PY_CODE, "python")
    resp = await client.post(f"{BASE}/{py['id']}/test", json={"output": "a", "expected": "a"}, headers=AUTH)
    data = (await resp.json())["data"]
    assert data["passed"] is True and data["score"] == 1.0 and data["reason"] == "py"
    resp = await client.post(
        f"{BASE}/{py['id']}/test", json={"output": "a", "params": {"x": 1}}, headers=AUTH
    )
    assert resp.status == 400


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("def evaluate(input, output, expected, metadata):\n    return 1 / 0\n", "execution_failed"),
        (
            "def evaluate(input, output, expected, metadata):\n    return {'passed': True, 'score': 2}\n",
            "execution_failed",
        ),
        ("def evaluate(input, output, expected, metadata):\n    while True:\n        pass\n", "timeout"),
    ],
)
async def test_execution_failure_is_503002(client: TestClient[Any, Any], code: str, error: str) -> None:
    body = {
        "name": f"bad-{error}-{len(code)}",
        "type": "code",
        "config": {"language": "python", "code": code, "timeout": 300},
    }
    created = (await (await client.post(BASE, json=body, headers=AUTH)).json())["data"]
    resp = await client.post(f"{BASE}/{created['id']}/test", json={"output": "x"}, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 422 and payload["code"] == 503002, payload
    data = payload["data"]
    assert data["passed"] is False and data["score"] is None and data["error"] == error and data["reason"]


async def test_preset_that_cannot_score_is_503002(client: TestClient[Any, Any]) -> None:
    resp = await client.post(
        f"{BASE}/exact_match/test", json={"output": "x"}, headers=AUTH
    )  # no expected answer
    payload = await resp.json()
    assert resp.status == 422 and payload["code"] == 503002 and payload["data"]["error"] == "missing_field"


async def test_openapi_document_is_served_and_lists_every_route(client: TestClient[Any, Any]) -> None:
    doc = await (await client.get("/api/v1/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    served = {
        (r.method.lower(), r.resource.canonical) for r in client.app.router.routes() if r.resource is not None
    }  # type: ignore[union-attr]
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops if m != "parameters"}
    api_routes = {
        (m, p) for m, p in served if p.startswith("/api/v1/") and "openapi" not in p and m != "head"
    }
    assert api_routes == documented


async def test_unknown_route_and_method_answer_in_the_envelope(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/api/v1/nothing")
    assert resp.status == 404 and (await resp.json())["code"] == 404
    resp = await client.patch(f"{BASE}/presets", headers=AUTH)
    assert resp.status == 405 and "GET" in resp.headers["Allow"]
