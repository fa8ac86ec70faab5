"""GET /api/v1/stats/compare on the real Redis: live and shadow versions of the same events, flips equal the
flips computed from the published results; no shared events: an empty comparison; unknown: 404."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.config import parse_config_text, shadow_routings
from streameval.features.compare import CompactScoresRecorder
from streameval.features.web import dashboard_features
from streameval.models import GradedResult
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore

CONFIG = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}, {evaluator: contains, weight: 0}]
    shadow:
      - evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}, {evaluator: contains, weight: 0}]
        threshold: 0.5
"""
OUTPUTS = ["Paris", "Pariss", "London", "paris", "Paris!", "Lyon", "Paris", "Rome", "Parus", "P"]


def batch(run: str, outputs: list[str] = OUTPUTS) -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps({"id": f"{run}-{i}", "model": "m", "output": o, "expected": "Paris"}),
            Source("evals.requests", 0, i),
        )
        for i, o in enumerate(outputs)
    ]


@pytest.fixture
async def setup(
    aredis: aioredis.Redis, prefix: str
) -> AsyncIterator[tuple[TestClient[Any, Any], Processor, str, str]]:
    _, suites = parse_config_text(textwrap.dedent(CONFIG))
    store = ResultStore(aredis, prefix=prefix, windows=(60,), recorders=[CompactScoresRecorder(3 * 86400)])
    shadows = [Pipeline(r, result_marks={"shadow": True}) for r in shadow_routings(suites)]
    proc = Processor(Pipeline(suites), store, shadows=shadows)
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        yield client, proc, suites.by_name["qa"].version, suites.by_name["qa"].shadows[0].suite.version


async def get(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_compare_flips_equal_those_of_the_published_results(setup: Any) -> None:
    client, proc, live, shadow = setup
    messages = await proc.process_batch(batch("c1"))
    messages += await proc.process_batch(batch("c1"))  # redelivered: nothing changes
    results = [GradedResult.model_validate_json(m.value) for m in messages]
    a = {r.id: r for r in results if r.suite_version == live}
    b = {r.id: r for r in results if r.suite_version == shadow}
    expected_to_fail = sorted(i for i in a if a[i].passed and not b[i].passed)
    expected_to_pass = sorted(i for i in a if b[i].passed and not a[i].passed)
    assert expected_to_fail or expected_to_pass  # the versions disagree somewhere
    body = (await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}"))["data"]
    assert body["n"] == len(OUTPUTS) and body["empty"] is False
    assert sorted(body["pass_to_fail_ids"]) == expected_to_fail and body["pass_to_fail"] == len(
        expected_to_fail
    )
    assert sorted(body["fail_to_pass_ids"]) == expected_to_pass and body["fail_to_pass"] == len(
        expected_to_pass
    )
    diff = sum(b[i].score - a[i].score for i in a) / len(a)
    assert body["mean_diff"] == pytest.approx(diff, abs=1e-6)  # float32 storage
    assert body["ci_low"] <= body["mean_diff"] <= body["ci_high"]
    assert set(body["evaluators"]) == {"exact_match", "similarity", "contains"}
    assert body["evaluators"]["contains"]["mean_diff"] == pytest.approx(0.0, abs=1e-4)
    assert body["evaluators"]["exact_match"] == {"n": 0, "only_in": "a"}


async def test_versions_without_shared_events_compare_empty(
    setup: Any, aredis: aioredis.Redis, prefix: str
) -> None:
    client, proc, live, shadow = setup
    live_only = Processor(proc.pipeline, proc.store)
    await live_only.process_batch(batch("only-live"))
    shadow_only = Processor(proc.shadows[0], proc.store)
    await shadow_only.process_batch(batch("only-shadow"))
    body = (await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}"))["data"]
    assert body["empty"] is True and body["n"] == 0 and "no event in common" in body["reason"]


async def test_compare_an_unknown_version_is_404(setup: Any) -> None:
    client, proc, live, _ = setup
    await proc.process_batch(batch("c3"))
    body = await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b=0123456789ab", 404)
    assert live in body["message"] and live in body["data"]["known"]
    await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}", 400)
