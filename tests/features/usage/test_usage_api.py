"""Quality per cost and the budgets' status in the web app, on real Redis with the worker's wiring: the models
of a suite side by side (and per slice value) against a recount by hand; a budget's spend so far."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Sink
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.config import parse_config
from streameval.features.setup import annotators, enabled, record_plugins, window_steps
from streameval.features.web import dashboard_features
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.windows import WindowCloser

CONFIG: dict[str, Any] = {
    "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
    "segments": {"dimensions": {"tier": "metadata.tier"}},
    "prices": {
        "currency": "EUR",
        "models": {"big": {"input": 10, "output": 30}, "small": {"input": 1, "output": 2}},
    },
    "budgets": [{"name": "qa-day", "scope": {"suite": "qa"}, "period": "day", "limit": 2, "currency": "EUR"}],
}
# model, output (expected "Paris"), tier, input tokens, output tokens
EVENTS = [
    ("big", "Paris", "gold", 1000, 100),  # 0.013
    ("big", "Paris", "free", 2000, 100),  # 0.023
    ("small", "Paris", "gold", 1000, 100),  # 0.0012
    ("small", "Rome", "free", 1000, 100),  # 0.0012
    ("small", "Lyon", "free", 3000, 500),  # 0.004
    ("other", "Paris", "free", 10, 10),  # no price
]


@pytest.fixture
async def client(
    aredis: aioredis.Redis, prefix: str
) -> AsyncIterator[tuple[TestClient[Any, Any], ResultStore]]:
    _, suites = parse_config(CONFIG)
    store = ResultStore(
        aredis, prefix=prefix, windows=(60,), recorders=record_plugins(enabled(Settings(), suites))
    )
    proc = Processor(Pipeline(suites, annotators=annotators(suites)), store)
    now = time.time()
    raws = [
        (
            orjson.dumps(
                {
                    "id": f"e{i}",
                    "model": model,
                    "output": output,
                    "expected": "Paris",
                    "metadata": {"tier": tier},
                    "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                }
            ),
            Source("evals.requests", 0, i),
        )
        for i, (model, output, tier, tokens_in, tokens_out) in enumerate(EVENTS)
    ]
    await proc.process_batch(raws)
    await proc.process_batch(raws)  # redelivered: counted once
    closer = WindowCloser(store, [], worker_id="w", steps=window_steps(suites, (60,)))
    await closer.run_once(Sink())  # the budgets' check (the window is still open)
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    assert now  # the events' time is now: one window of 60 s
    async with TestClient(TestServer(app)) as test_client:
        yield test_client, store


async def get(client: TestClient[Any, Any], path: str) -> Any:
    resp = await client.get(path)
    assert resp.status == 200, await resp.text()
    return (await resp.json())["data"]


async def test_models_side_by_side(client: Any) -> None:
    http, _ = client
    body = await get(http, "/api/v1/stats/compare/models?suite=qa&size=60")
    rows = {r["model"]: r for r in body["rows"]}
    assert set(rows) == {"big", "small", "other"}
    assert (rows["big"]["count"], rows["big"]["pass_rate"], rows["big"]["mean"]) == (2, 1.0, 1.0)
    assert rows["big"]["cost_per_1000"] == pytest.approx(1000 * (0.013 + 0.023) / 2)
    assert rows["small"]["count"] == 3 and rows["small"]["pass_rate"] == pytest.approx(1 / 3)
    assert rows["small"]["cost_per_1000"] == pytest.approx(1000 * (0.0012 + 0.0012 + 0.004) / 3)
    assert rows["small"]["currency"] == "EUR"
    assert (rows["other"]["cost_per_1000"], rows["other"]["unpriced"]) == (None, 1)  # never $0


async def test_models_side_by_side_per_slice(client: Any) -> None:
    http, _ = client
    body = await get(http, "/api/v1/stats/compare/models?suite=qa&size=60&dimension=tier")
    rows = {(r["model"], r["value"]): r for r in body["rows"]}
    assert rows[("small", "free")]["count"] == 2 and rows[("small", "free")]["pass_rate"] == 0.0
    assert rows[("small", "free")]["cost_per_1000"] == pytest.approx(1000 * (0.0012 + 0.004) / 2)
    assert rows[("big", "gold")]["cost_per_1000"] == pytest.approx(13.0)


async def test_budgets_status(client: Any) -> None:
    http, _ = client
    (budget,) = (await get(http, "/api/v1/stats/budgets"))["budgets"]
    assert budget["name"] == "qa-day" and budget["currency"] == "EUR"
    assert budget["spend"] == pytest.approx(0.013 + 0.023 + 0.0012 + 0.0012 + 0.004)
    assert budget["share"] == pytest.approx(budget["spend"] / 2)
