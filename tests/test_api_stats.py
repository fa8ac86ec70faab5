"""Dashboard read endpoints over the raw Redis aggregates the store writes (real Redis)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app, remember_alert
from streameval.api._stats import recent_alerts_key
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.store import ResultStore

SIZE = 60
T0 = 1_800_000_000 - 1_800_000_000 % SIZE  # a window boundary


def result(i: int, model: str, suite: str, score: float, at: float) -> GradedResult:
    return GradedResult(
        id=f"{model}-{suite}-{i}", model=model, suite=suite, score=score, passed=score >= 0.6, threshold=0.6,
        grade="good" if score >= 0.6 else "fail",
        evaluators=[EvaluatorResult(name="ev", score=score, passed=score >= 0.6, weight=1, error=None if score else "boom")],
        event_time=format_time(at), evaluated_at=format_time(at), latency_ms=1.0, pipeline_version="t",
    )  # fmt: skip


@pytest.fixture
async def client(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[TestClient[Any, Any]]:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE, 3600))
    items = []
    # model a/suite q: window 0 scores 1.0 and 0.0, window 2: 0.8; model b/suite "x y": window 1: 0.5
    for i, (model, suite, score, at) in enumerate([("a", "q", 1.0, T0 + 1), ("a", "q", 0.0, T0 + 2),
                                                   ("a", "q", 0.8, T0 + 2 * SIZE), ("b", "x y", 0.5, T0 + SIZE + 5)]):  # fmt: skip
        r = result(i, model, suite, score, at)
        counters = None
        if model == "b":  # a judged event: the panel's per-judge counters (scores on 0-10)
            r = r.model_copy(update={"evaluators": [*r.evaluators, EvaluatorResult(name="judge_panel", score=0.7, passed=True, weight=0)]})
            counters = {"judge_panel": {"j1.n": 2, "j1.score_sum": 14, "j1.score_sumsq": 100, "j1.calls": 1, "j1.cache_hits": 1,
                                        "j2.errors": 1, "j2.calls": 1}}  # fmt: skip
        items.append((r, r.model_dump_json().encode(), counters))
    await store.record_many(items, [("schema", "t:0:1", T0 + 3), ("invalid_json", "t:0:2", T0 + 3), ("schema", "t:0:3", T0 + 2 * SIZE)])
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE, 3600))
    async with TestClient(TestServer(app)) as c:
        yield c


async def data(client: TestClient[Any, Any], path: str) -> Any:
    resp = await client.get(path)
    assert resp.status == 200, await resp.text()
    return (await resp.json())["data"]


async def test_pairs_all_time(client: TestClient[Any, Any]) -> None:
    pairs = {(p["model"], p["suite"]): p for p in await data(client, "/api/v1/stats/pairs")}
    assert set(pairs) == {("a", "q"), ("b", "x y")}  # URL-quoted suite names come back decoded
    a = pairs[("a", "q")]
    assert a["count"] == 3 and a["mean"] == pytest.approx(0.6) and a["passRate"] == pytest.approx(2 / 3)
    assert a["grades"] == {"good": 2, "fail": 1}
    assert a["evaluators"] == {"ev": {"count": 3, "mean": pytest.approx(0.6), "errors": 1}} and a["judges"] == {}
    judges = pairs[("b", "x y")]["judges"]
    assert judges["j1"] == {"n": 2, "mean": 7.0, "sd": pytest.approx(1.0), "calls": 1, "errors": 0, "cacheHits": 1}
    assert judges["j2"] == {"n": 0, "mean": None, "sd": None, "calls": 1, "errors": 1, "cacheHits": 0}


async def test_windows_latest_with_data(client: TestClient[Any, Any]) -> None:
    w = await data(client, "/api/v1/stats/windows")
    assert w["size"] == SIZE and w["starts"] == [T0, T0 + SIZE, T0 + 2 * SIZE]
    series = {(s["model"], s["suite"]): s["points"] for s in w["series"]}
    assert [(p["start"], p["count"], p["mean"]) for p in series[("a", "q")]] == [(T0, 2, 0.5), (T0 + 2 * SIZE, 1, 0.8)]
    assert [p["start"] for p in series[("b", "x y")]] == [T0 + SIZE]
    last2 = await data(client, "/api/v1/stats/windows?last=2")
    assert last2["starts"] == [T0 + SIZE, T0 + 2 * SIZE]
    hourly = await data(client, "/api/v1/stats/windows?size=3600")
    assert sum(p["count"] for s in hourly["series"] for p in s["points"]) == 4


async def test_dead_letters(client: TestClient[Any, Any]) -> None:
    dl = await data(client, "/api/v1/stats/deadletters")
    assert dl["total"] == {"schema": 2, "invalid_json": 1}
    assert dl["points"] == [{"start": T0, "kinds": {"schema": 1, "invalid_json": 1}}, {"start": T0 + 2 * SIZE, "kinds": {"schema": 1}}]


async def test_alerts_empty_then_listed(client: TestClient[Any, Any], aredis: aioredis.Redis, prefix: str) -> None:
    assert await data(client, "/api/v1/alerts") == []
    await aredis.lpush(recent_alerts_key(prefix), orjson.dumps({"rule": "r1"}), b"not json", orjson.dumps({"rule": "r2"}))
    assert await data(client, "/api/v1/alerts?limit=2") == [{"rule": "r2"}]  # newest first; bad entries skipped
    assert [a["rule"] for a in await data(client, "/api/v1/alerts")] == ["r2", "r1"]


@pytest.mark.parametrize(
    "path",
    ["/api/v1/stats/windows?size=7", "/api/v1/stats/windows?last=0", "/api/v1/stats/windows?last=x",
     "/api/v1/stats/deadletters?size=-1", "/api/v1/alerts?limit=501"],
)  # fmt: skip
async def test_bad_parameters_are_400(client: TestClient[Any, Any], path: str) -> None:
    resp = await client.get(path)
    assert resp.status == 400 and (await resp.json())["code"] == 400


@pytest.mark.parametrize("page", ["/evaluators", "/evaluators/regex", "/evaluators/new", "/dashboard"])
async def test_pages_and_assets_are_served(client: TestClient[Any, Any], page: str) -> None:
    resp = await client.get(page)
    assert resp.status == 200 and resp.content_type == "text/html"
    html = await resp.text()
    for asset in [a for a in ("common.js", "app.css") if a in html]:
        assert (await client.get(f"/static/{asset}")).status == 200
    assert "<script src=\"https://" not in html  # nothing from a CDN


async def test_home_redirects_to_the_evaluators(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/", allow_redirects=False)
    assert resp.status == 302 and resp.headers["Location"] == "/evaluators"


async def test_remember_alert_keeps_the_latest(aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from streameval.api import _stats

    monkeypatch.setattr(_stats, "RECENT_ALERTS", 3)
    for i in range(5):
        await remember_alert(aredis, prefix, orjson.dumps({"rule": f"r{i}"}))
    assert [orjson.loads(v)["rule"] for v in await aredis.lrange(recent_alerts_key(prefix), 0, -1)] == ["r4", "r3", "r2"]


async def test_remember_alert_never_raises_when_redis_is_down(prefix: str) -> None:
    dead = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    await remember_alert(dead, prefix, b"{}")  # logged, not raised: the alert is already on its topic
    await dead.aclose()
