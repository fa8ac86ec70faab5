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
from streameval.features.drilldown import ExamplesRecorder, sample_rank
from streameval.features.web import dashboard_features
from streameval.models import EvaluatorResult, GradedResult, format_time
from streameval.store import Receipt, ResultStore

SIZE = 60
T0 = 1_800_000_000 - 1_800_000_000 % SIZE  # a window boundary


def result(i: int, model: str, suite: str, score: float, at: float) -> GradedResult:
    return GradedResult(
        id=f"{model}-{suite}-{i}",
        model=model,
        suite=suite,
        score=score,
        passed=score >= 0.6,
        threshold=0.6,
        grade="good" if score >= 0.6 else "fail",
        evaluators=[
            EvaluatorResult(
                name="ev", score=score, passed=score >= 0.6, weight=1, error=None if score else "boom"
            )
        ],
        event_time=format_time(at),
        evaluated_at=format_time(at),
        latency_ms=1.0,
        pipeline_version="t",
    )


@pytest.fixture
async def client(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[TestClient[Any, Any]]:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE, 3600))
    items = []
    # model a/suite q: window 0 scores 1.0 and 0.0, window 2: 0.8; model b/suite "x y": window 1: 0.5
    for i, (model, suite, score, at) in enumerate(
        [
            ("a", "q", 1.0, T0 + 1),
            ("a", "q", 0.0, T0 + 2),
            ("a", "q", 0.8, T0 + 2 * SIZE),
            ("b", "x y", 0.5, T0 + SIZE + 5),
        ]
    ):
        r = result(i, model, suite, score, at)
        counters = None
        if model == "b":  # a judged event: the panel's per-judge counters (scores on 0-10)
            r = r.model_copy(
                update={
                    "evaluators": [
                        *r.evaluators,
                        EvaluatorResult(name="judge_panel", score=0.7, passed=True, weight=0),
                    ]
                }
            )
            counters = {
                "judge_panel": {
                    "j1.n": 2,
                    "j1.score_sum": 14,
                    "j1.score_sumsq": 100,
                    "j1.calls": 1,
                    "j1.cache_hits": 1,
                    "j2.errors": 1,
                    "j2.calls": 1,
                }
            }
        items.append((r, r.model_dump_json().encode(), counters))
    await store.record_many(
        items,
        [("schema", "t:0:1", T0 + 3), ("invalid_json", "t:0:2", T0 + 3), ("schema", "t:0:3", T0 + 2 * SIZE)],
    )
    app = create_web_app(
        aredis, prefix=prefix, token=None, windows=(SIZE, 3600), features=dashboard_features()
    )
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
    assert (
        a["evaluators"] == {"ev": {"count": 3, "mean": pytest.approx(0.6), "errors": 1}} and a["judges"] == {}
    )
    judges = pairs[("b", "x y")]["judges"]
    assert judges["j1"] == {
        "n": 2,
        "mean": 7.0,
        "sd": pytest.approx(1.0),
        "calls": 1,
        "errors": 0,
        "cacheHits": 1,
        "tokens": 0,
        "cost": None,
    }
    assert judges["j2"] == {
        "n": 0,
        "mean": None,
        "sd": None,
        "calls": 1,
        "errors": 1,
        "cacheHits": 0,
        "tokens": 0,
        "cost": None,
    }


async def test_windows_latest_with_data(client: TestClient[Any, Any]) -> None:
    w = await data(client, "/api/v1/stats/windows")
    assert w["size"] == SIZE and w["starts"] == [T0, T0 + SIZE, T0 + 2 * SIZE]
    series = {(s["model"], s["suite"]): s["points"] for s in w["series"]}
    assert [(p["start"], p["count"], p["mean"]) for p in series[("a", "q")]] == [
        (T0, 2, 0.5),
        (T0 + 2 * SIZE, 1, 0.8),
    ]
    assert [p["start"] for p in series[("b", "x y")]] == [T0 + SIZE]
    last2 = await data(client, "/api/v1/stats/windows?last=2")
    assert last2["starts"] == [T0 + SIZE, T0 + 2 * SIZE]
    hourly = await data(client, "/api/v1/stats/windows?size=3600")
    assert sum(p["count"] for s in hourly["series"] for p in s["points"]) == 4


async def test_dead_letters(client: TestClient[Any, Any]) -> None:
    dl = await data(client, "/api/v1/stats/deadletters")
    assert dl["total"] == {"schema": 2, "invalid_json": 1}
    assert dl["points"] == [
        {"start": T0, "kinds": {"schema": 1, "invalid_json": 1}},
        {"start": T0 + 2 * SIZE, "kinds": {"schema": 1}},
    ]


async def test_alerts_empty_then_listed(
    client: TestClient[Any, Any], aredis: aioredis.Redis, prefix: str
) -> None:
    assert await data(client, "/api/v1/alerts") == []
    await aredis.lpush(
        recent_alerts_key(prefix), orjson.dumps({"rule": "r1"}), b"not json", orjson.dumps({"rule": "r2"})
    )
    assert await data(client, "/api/v1/alerts?limit=2") == [
        {"rule": "r2"}
    ]  # newest first; bad entries skipped
    assert [a["rule"] for a in await data(client, "/api/v1/alerts")] == ["r2", "r1"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/stats/windows?size=7",
        "/api/v1/stats/windows?last=0",
        "/api/v1/stats/windows?last=x",
        "/api/v1/stats/deadletters?size=-1",
        "/api/v1/alerts?limit=501",
    ],
)
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
    assert '<script src="https://' not in html  # nothing from a CDN


async def test_the_favicon_is_served_where_browsers_ask_and_where_the_pages_link_it(
    client: TestClient[Any, Any],
) -> None:
    for path in ("/favicon.ico", "/static/favicon.svg"):
        resp = await client.get(path)
        assert resp.status == 200 and resp.content_type == "image/svg+xml", path
        assert (await resp.text()).startswith("<svg")
    for page in ("/evaluators", "/evaluators/regex", "/dashboard"):
        assert '<link rel="icon" href="/static/favicon.svg"' in await (await client.get(page)).text()


async def test_home_redirects_to_the_evaluators(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/", allow_redirects=False)
    assert resp.status == 302 and resp.headers["Location"] == "/evaluators"


async def test_remember_alert_keeps_the_latest(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streameval.api import _stats

    monkeypatch.setattr(_stats, "RECENT_ALERTS", 3)
    for i in range(5):
        await remember_alert(aredis, prefix, orjson.dumps({"rule": f"r{i}"}))
    assert [orjson.loads(v)["rule"] for v in await aredis.lrange(recent_alerts_key(prefix), 0, -1)] == [
        "r4",
        "r3",
        "r2",
    ]


async def test_remember_alert_never_raises_when_redis_is_down(prefix: str) -> None:
    dead = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    await remember_alert(dead, prefix, b"{}")  # logged, not raised: the alert is already on its topic
    await dead.aclose()


async def test_pairs_panel_agreement_cost_and_no_blank_judge(aredis: aioredis.Redis, prefix: str) -> None:
    """The panel's pair, alpha and repeat sums are not judges; they give alpha, Pearson and consistency."""
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,))
    r = result(0, "m", "s", 0.4, T0 + 1)
    r = r.model_copy(
        update={
            "evaluators": [
                *r.evaluators,
                EvaluatorResult(name="judge_panel", score=0.6, passed=True, weight=0),
            ]
        }
    )
    # two judges agreeing perfectly on 3 events: Pearson 1; alpha from the summed unit terms
    counters = {
        "judge_panel": {
            "j1.n": 3,
            "j1.score_sum": 18,
            "j1.cost": 0.25,
            "j1.prompt_tokens": 300,
            "j1.completion_tokens": 30,
            "j2.n": 3,
            "j2.score_sum": 18,
            "j2.cost": 0.5,
            "pair:j1:j2:n": 3,
            "pair:j1:j2:sx": 18,
            "pair:j1:j2:sy": 18,
            "pair:j1:j2:sxx": 116,
            "pair:j1:j2:syy": 116,
            "pair:j1:j2:sxy": 116,
            "alpha:n": 6,
            "alpha:s1": 36,
            "alpha:s2": 232,
            "alpha:do": 0,
            "repeat:n": 2,
            "repeat:sx": 10,
            "repeat:sy": 10,
            "repeat:sxx": 52,
            "repeat:syy": 52,
            "repeat:sxy": 52,
        }
    }
    gated = r.model_copy(update={"failed_gates": ["pii"], "id": "g"})
    await store.record_many(
        [(r, r.model_dump_json().encode(), counters), (gated, gated.model_dump_json().encode(), None)]
    )
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE,), features=dashboard_features())
    async with TestClient(TestServer(app)) as c:
        [pair] = await data(c, "/api/v1/stats/pairs")
        assert set(pair["judges"]) == {"j1", "j2"}  # no "" judge from the pair/alpha/repeat counters
        assert pair["pearson"] == {"j1|j2": pytest.approx(1.0)} and pair["alpha"] == pytest.approx(1.0)
        assert pair["consistency"] == pytest.approx(1.0)
        assert pair["cost"] == pytest.approx(0.75) and pair["judges"]["j1"]["cost"] == pytest.approx(0.25)
        assert pair["tokens"] == {"prompt": 300, "completion": 30} and pair["judges"]["j1"]["tokens"] == 330
        assert pair["gateFailures"] == {"pii": 1} and pair["latencyP95Ms"] is not None


def graded(i: int, score: float, at: float, *, model: str = "m", suite: str = "s") -> GradedResult:
    r = result(i, model, suite, score, at)
    return r.model_copy(update={"evaluators": [r.evaluators[0].model_copy(update={"reason": f"reason {i}"})]})


async def test_examples_keep_the_worst_and_a_sample_of_the_failing(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), recorders=[ExamplesRecorder(5)])
    # batch 1: 12 events, scores 0.30..0.85 (falling) : the 5 lowest are 7..11; failing (< 0.6): 6..11
    batch1 = [graded(i, 0.85 - 0.05 * i, T0 + 1 + i) for i in range(12)]
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in batch1])
    # batch 2: a new lowest score and a high one (skipped by the worker's cut-off) and a later failure
    batch2 = [graded(20, 0.05, T0 + 30), graded(21, 0.99, T0 + 31), graded(22, 0.5, T0 + 40)]
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in batch2])
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE,), features=dashboard_features())
    async with TestClient(TestServer(app)) as c:
        worst = await data(c, f"/api/v1/stats/examples?model=m&suite=s&window={T0}&kind=worst")
        assert worst["window"] == T0 and worst["kind"] == "worst"
        assert [e["id"] for e in worst["examples"]] == ["m-s-20", "m-s-11", "m-s-10", "m-s-9", "m-s-8"]
        assert worst["examples"][0]["evaluators"][0]["reason"] == "reason 20"
        failing = await data(
            c, "/api/v1/stats/examples?model=m&suite=s&kind=failing"
        )  # default: the latest window
        # the 5 failures (of 8) with the lowest sample rank (a hash of id and content), listed latest first
        failed = [r for r in batch1 + batch2 if not r.passed]
        rank = {r.id: sample_rank(store._prepare(0, (r, b"", None)).digest) for r in failed}
        chosen = sorted(failed, key=lambda r: rank[r.id])[:5]
        assert [e["id"] for e in failing["examples"]] == [
            r.id for r in sorted(chosen, key=lambda r: r.event_time, reverse=True)
        ]
        assert len(failed) == 8 and all(not e["passed"] for e in failing["examples"])
        # every example id opens its full result while it is retained
        for e in worst["examples"]:
            full = await data(c, f"/api/v1/results/{e['id']}")
            assert full["id"] == e["id"] and full["score"] == pytest.approx(e["score"])
        narrowed = await data(c, "/api/v1/results/m-s-3?model=m&suite=s")
        assert narrowed["score"] == pytest.approx(0.7)
        empty = await data(c, f"/api/v1/stats/examples?model=other&suite=s&window={T0}")
        assert empty["examples"] == []
    # at most 5 per kind in Redis, whatever the batches held
    assert await aredis.zcard(store.keys.examples(store.pair_id("m", "s"), "worst", SIZE, T0)) == 5


async def test_a_redelivered_batch_adds_no_example_twice(aredis: aioredis.Redis, prefix: str) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), recorders=[ExamplesRecorder(3)])
    items = [(r, r.model_dump_json().encode(), None) for r in (graded(i, 0.1 * i, T0 + i) for i in range(4))]
    await store.record_many(items)
    await ResultStore(aredis, prefix=prefix, windows=(SIZE,), recorders=[ExamplesRecorder(3)]).record_many(
        items
    )  # another worker
    members = await aredis.zrange(store.keys.examples(store.pair_id("m", "s"), "worst", SIZE, T0), 0, -1)
    assert [orjson.loads(m)["id"] for m in members] == ["m-s-0", "m-s-1", "m-s-2"]


async def test_result_not_retained_is_404_with_a_clear_message(aredis: aioredis.Redis, prefix: str) -> None:
    store = ResultStore(
        aredis, prefix=prefix, windows=(SIZE,), redelivery_ttl_s=0, recorders=[ExamplesRecorder()]
    )  # keeps no full results, and examples
    r = graded(0, 0.2, T0 + 1)
    await store.record_many([(r, r.model_dump_json().encode(), None)])
    for ttl in (0, 3600):
        app = create_web_app(
            aredis,
            prefix=prefix,
            token=None,
            windows=(SIZE,),
            redelivery_ttl_s=ttl,
            features=dashboard_features(),
        )
        async with TestClient(TestServer(app)) as c:
            resp = await c.get("/api/v1/results/m-s-9")
            body = await resp.json()
            assert resp.status == 404 and body["code"] == 404 and "not retained" in body["message"]
            assert "/api/v1/stats/examples" in body["message"]
            ex = await data(c, f"/api/v1/stats/examples?model=m&suite=s&window={T0}")
            assert [e["id"] for e in ex["examples"]] == ["m-s-0"]  # the example outlives the full result
            kept = await data(c, "/api/v1/results/m-s-0")  # and the results API answers with it
            assert kept["id"] == "m-s-0" and kept["example"] == {"size": SIZE, "window": T0, "kind": "worst"}


async def test_a_published_result_is_read_from_the_windows_examples(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), recorders=[ExamplesRecorder(2)])
    results = [graded(i, 0.1 * (i + 1), T0 + 1 + i) for i in range(4)]
    receipt = Receipt()
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in results], receipt=receipt)
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE,), features=dashboard_features())
    async with TestClient(TestServer(app)) as c:
        full = await data(c, "/api/v1/results/m-s-3?model=m&suite=s")  # the copy, until the broker has it
        assert full["pipeline_version"] == results[3].pipeline_version and "example" not in full
        store.published([receipt])  # the broker acknowledged the batch: the copies go
        await store.flush_published(0)
        worst = await data(c, "/api/v1/results/m-s-0?model=m&suite=s")
        assert worst["example"]["kind"] == "worst" and worst["score"] == pytest.approx(0.1)
        resp = await c.get("/api/v1/results/m-s-3?model=m&suite=s")  # neither kept nor an example
        assert resp.status == 404


@pytest.mark.parametrize(
    "query",
    [
        "suite=s",
        "model=m",
        "model=m&suite=s&kind=best",
        "model=m&suite=s&window=17",
        "model=m&suite=s&window=soon",
        "model=m&suite=s&size=7",
    ],
)
async def test_examples_bad_parameters_are_400(client: TestClient[Any, Any], query: str) -> None:
    resp = await client.get(f"/api/v1/stats/examples?{query}")
    body = await resp.json()
    assert resp.status == 400 and body["code"] == 400 and body["message"]
