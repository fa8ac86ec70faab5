"""The registry API is as strict as the event path and bounded: strict JSON bodies, a code size limit,
a count limit kept atomically, and workers that load at most that many evaluators (real Redis)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import ApiSettings, create_web_app
from streameval.registry import CodeConfig, LiveRegistry, RegistryLimits, RegistryStore

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
BASE = "/api/v1/evaluators"
CODE = "def evaluate(input, output, expected, metadata):\n    return {'passed': True}\n"
LIMITS = RegistryLimits(max_evaluators=3, max_code_bytes=200)


@pytest.fixture
async def client(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[TestClient[Any, Any]]:
    app = create_web_app(aredis, prefix=prefix, token=TOKEN, registry_limits=LIMITS)
    async with TestClient(TestServer(app)) as c:
        yield c


def _create_body(name: str, code: str = CODE) -> str:
    return f'{{"name":"{name}","type":"code","config":{{"language":"python","code":{json.dumps(code)}}}}}'


async def _names(client: TestClient[Any, Any]) -> list[str]:
    data = (await (await client.get(BASE, params={"type": "code"})).json())["data"]
    return sorted(e["name"] for e in data)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            '{"name":"a","name":"b","type":"code","config":{"language":"python","code":"x=1"}}',
            "duplicate key 'name'",
        ),
        (
            '{"name":"a","type":"code","config":{"language":"python","code":"x=1","code":"y=2"}}',
            "duplicate key 'code'",
        ),
        ('{"name":"a","type":"code","config":{"language":"python","code":"x","timeout":1e999}}', "infinity"),
        (
            '{"name":"a","type":"code","config":{"language":"python","code":"x","timeout":NaN}}',
            "not valid JSON",
        ),
        ('{"name":"a","type":"code","config":' + "[" * 70 + "]" * 70 + "}", "nested 71 levels deep"),
    ],
)
async def test_bodies_must_be_strict_json(client: TestClient[Any, Any], body: str, words: str) -> None:
    resp = await client.post(BASE, data=body, headers=AUTH)
    payload = await resp.json()
    assert resp.status == 400 and payload["code"] == 400, payload
    assert words in payload["message"] and payload["data"]["errors"][0]["path"] == "$"
    assert await _names(client) == []  # {"name":"a","name":"b"} once created "b"


async def test_update_and_test_bodies_are_strict_too(client: TestClient[Any, Any]) -> None:
    resp = await client.post(BASE, data=_create_body("one"), headers=AUTH)
    assert resp.status == 201
    evaluator_id = (await resp.json())["data"]["id"]
    resp = await client.put(f"{BASE}/{evaluator_id}", data='{"name":"x","name":"y"}', headers=AUTH)
    assert resp.status == 400 and "duplicate key 'name'" in (await resp.json())["message"]
    resp = await client.post(
        f"{BASE}/exact_match/test", data='{"output":"a","metadata":{"n":-1e400}}', headers=AUTH
    )
    assert resp.status == 400 and "infinity" in (await resp.json())["message"]
    assert await _names(client) == ["one"]


async def test_code_over_the_size_limit_is_refused(client: TestClient[Any, Any]) -> None:
    big = CODE + "#" * 200
    resp = await client.post(BASE, data=_create_body("big", big), headers=AUTH)
    payload = await resp.json()
    assert resp.status == 400 and payload["data"]["errors"][0]["path"] == "$.config.code"
    assert f"the code is {len(big)} bytes (UTF-8); the limit is 200" in payload["message"]
    # the limit counts bytes, not characters: 70 three-byte characters are 210 bytes
    resp = await client.post(BASE, data=_create_body("wide", "#" + "中" * 70), headers=AUTH)
    assert resp.status == 400
    resp = await client.post(BASE, data=_create_body("small"), headers=AUTH)
    evaluator_id = (await resp.json())["data"]["id"]
    resp = await client.put(
        f"{BASE}/{evaluator_id}", json={"config": {"language": "python", "code": big}}, headers=AUTH
    )
    assert resp.status == 400 and (await resp.json())["data"]["errors"][0]["path"] == "$.config.code"


async def test_count_limit_holds_under_concurrent_creates(client: TestClient[Any, Any]) -> None:
    responses = await asyncio.gather(
        *(client.post(BASE, data=_create_body(f"e{i}"), headers=AUTH) for i in range(8))
    )
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] * 3 + [409] * 5
    refused = next(r for r in responses if r.status == 409)
    payload = await refused.json()
    assert payload["code"] == 409 and "holds 3 custom evaluators, the limit" in payload["message"]
    names = await _names(client)
    assert len(names) == 3
    # a full registry still takes updates; a delete makes room
    data = (await (await client.get(BASE, params={"type": "code"})).json())["data"]
    first = data[0]["id"]
    assert (
        await client.put(f"{BASE}/{first}", json={"description": "still editable"}, headers=AUTH)
    ).status == 200
    assert (await client.delete(f"{BASE}/{first}", headers=AUTH)).status == 200
    assert (await client.post(BASE, data=_create_body("later"), headers=AUTH)).status == 201
    assert (await client.post(BASE, data=_create_body("one-too-many"), headers=AUTH)).status == 409


async def test_worker_loads_at_most_the_limit(
    aredis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Five stored (by a writer with a higher limit); a worker with limit 3 loads the first 3 by name."""
    writer = RegistryStore(aredis, prefix=prefix, limits=RegistryLimits(max_evaluators=10))
    config = CodeConfig(language="python", code=CODE)
    for name in ("e", "d", "c", "b", "a"):
        await writer.create(name=name, description=None, config=config)
    live = LiveRegistry(RegistryStore(aredis, prefix=prefix, limits=RegistryLimits(max_evaluators=3)))
    with caplog.at_level(logging.WARNING, logger="streameval.registry"):
        await live.reload()
    assert [live.get(name=n) is not None for n in "abcde"] == [True, True, True, False, False]
    assert "holds 5 evaluators; loading the first 3 by name" in caplog.text


def test_limits_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMEVAL_REGISTRY_MAX_EVALUATORS", "7")
    monkeypatch.setenv("STREAMEVAL_REGISTRY_MAX_CODE_BYTES", "1000")
    assert ApiSettings().registry_limits() == RegistryLimits(max_evaluators=7, max_code_bytes=1000)
    monkeypatch.delenv("STREAMEVAL_REGISTRY_MAX_EVALUATORS")
    monkeypatch.delenv("STREAMEVAL_REGISTRY_MAX_CODE_BYTES")
    assert ApiSettings().registry_limits() == RegistryLimits()
