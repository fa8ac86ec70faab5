"""Preset views give test params that run as given, and only the fields a preset has."""

from __future__ import annotations

from collections.abc import AsyncIterator

import fakeredis.aioredis
import pytest
from _semantic_extra import need_extra
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.api._evaluators import preset_names

AUTH = {"Authorization": "Bearer t0ken"}


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    redis = fakeredis.aioredis.FakeRedis()
    app = create_web_app(redis, prefix="t:", token="t0ken")
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_the_presets_are_listed_with_their_params(client: TestClient) -> None:  # type: ignore[type-arg]
    presets = (await (await client.get("/api/v1/evaluators/presets")).json())["data"]
    assert [p["id"] for p in presets] == preset_names()
    regex = next(p for p in presets if p["id"] == "regex")
    assert regex["config"]["params"]["pattern"] == r"\d+" and regex["language"] is None


@pytest.mark.parametrize("name", preset_names())
async def test_every_preset_test_runs_with_its_default_params(client: TestClient, name: str) -> None:  # type: ignore[type-arg]
    if name == "semantic_similarity":
        need_extra()  # its default model is a package of its own (the semantic extra)
    presets = (await (await client.get("/api/v1/evaluators/presets")).json())["data"]
    preset = next(p for p in presets if p["id"] == name)
    body = {
        "output": '{"answer": "42"}',
        "expected": '{"answer": "42"}',
        "params": preset["config"]["params"],
    }
    response = await client.post(f"/api/v1/evaluators/{name}/test", json=body, headers=AUTH)
    # never a 400: the params the page fills in are valid (an evaluator may still need other event fields)
    assert response.status in (200, 422), (name, await response.text())


async def test_a_misspelt_preset_gets_a_suggestion(client: TestClient) -> None:  # type: ignore[type-arg]
    response = await client.get("/api/v1/evaluators/regx")
    assert response.status == 404
    assert (await response.json())["message"] == "evaluator 'regx' does not exist; did you mean 'regex'?"
