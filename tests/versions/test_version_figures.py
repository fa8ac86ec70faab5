"""Figures per suite version on the real Redis: idempotency per version, the old two-part pairs, labels,
alerts only on live versions, and the stats API's version choice (docs/versions.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.alerts import AlertRule
from streameval.api import create_web_app
from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.compare import CompactScoresRecorder
from streameval.features.drilldown import ExamplesRecorder
from streameval.features.web import dashboard_features
from streameval.keyspace import Keys
from streameval.models import Aggregate, Alert, GradedResult, format_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline
from streameval.store import ResultStore
from streameval.versionstore import VersionInfo, register_versions
from streameval.windows import WindowCloser

T0 = 1_800_000_000
SIZE = 10
V1 = {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
# v2: a softer suite (similarity instead of exact match): some verdicts flip
V2 = {
    "suites": [
        {
            "name": "qa",
            "default": True,
            "threshold": 0.5,
            "evaluators": [{"evaluator": "similarity", "params": {"algorithm": "levenshtein"}}],
        }
    ]
}
OUTPUTS = ["Paris", "Pariss", "London", "paris", "Paris!", "Lyon"]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    async def redis(self) -> float:
        return self.now


async def graded(config: dict[str, Any], outputs: list[str] = OUTPUTS) -> list[GradedResult]:
    _, suites = parse_config(config)
    pipeline = Pipeline(suites)
    out = []
    for i, output in enumerate(outputs):
        raw = orjson.dumps(
            {
                "id": f"e{i}",
                "model": "m",
                "output": output,
                "expected": "Paris",
                "timestamp": format_time(T0 + 1 + i / 10),
            }
        )
        outcome = await pipeline.process(raw)
        assert outcome.result is not None
        out.append(outcome.result)
    return out


def items(results: list[GradedResult]) -> list[tuple[GradedResult, bytes, None]]:
    return [(r, r.model_dump_json().encode(), None) for r in results]


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + 2)


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str, clock: Clock) -> ResultStore:
    return ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=3.0,
        clock=clock,
        recorders=[CompactScoresRecorder(3 * 86400), ExamplesRecorder()],
    )


async def test_each_version_counts_each_event_once(store: ResultStore) -> None:
    v1, v2 = await graded(V1), await graded(V2)
    assert v1[0].suite_version != v2[0].suite_version
    assert await store.record_many(items(v1)) == [None] * len(v1)
    assert await store.record_many(items(v2)) == [None] * len(v2)  # another version: counted again, there
    again = await store.record_many(items(v1) + items(v2))  # redelivered: nothing counted
    assert all(r is not None for r in again)
    figures = {a.version: a for a in await store.all_time()}
    assert set(figures) == {v1[0].suite_version, v2[0].suite_version}
    for results in (v1, v2):
        aggregate = figures[results[0].suite_version]
        assert aggregate.count == len(OUTPUTS)
        assert aggregate.fields["sum"] == pytest.approx(sum(r.score for r in results))
        assert aggregate.fields["passes"] == sum(r.passed for r in results)


async def test_pairs_of_the_layout_before_versions_stay_readable(store: ResultStore) -> None:
    old = [r.model_copy(update={"suite_version": None}) for r in await graded(V1)]
    new = await graded(V1)
    await store.record_many(items(old))
    await store.record_many(items(new))
    by_version = {(a.suite, a.version): a.count for a in await store.all_time()}
    assert by_version == {("qa", ""): len(OUTPUTS), ("qa", new[0].suite_version): len(OUTPUTS)}
    assert (await store.window(SIZE, T0, "m", "qa")).count == len(OUTPUTS)  # the two-part pair, as before
    assert Keys.split_pair(Keys.pair_id("m", "qa")) == ("m", "qa", "")


async def test_a_label_names_one_version(aredis: aioredis.Redis, prefix: str) -> None:
    keys = Keys(prefix)
    await register_versions(aredis, keys, [VersionInfo("qa", "aaaaaaaaaaaa", "stable", {"x": 1})], run="live")
    await register_versions(
        aredis, keys, [VersionInfo("qa", "aaaaaaaaaaaa", "stable", {"x": 1})], run="live"
    )  # same: fine
    await register_versions(
        aredis, keys, [VersionInfo("other", "bbbbbbbbbbbb", "stable", {"x": 2})], run="live"
    )
    with pytest.raises(ConfigError) as caught:
        await register_versions(
            aredis,
            keys,
            [
                VersionInfo("qa", "cccccccccccc", "stable", {"x": 3}),
                VersionInfo("z", "dddddddddddd", None, {}),
            ],
            run="live",
            file="s.yaml",
        )
    message = str(caught.value)
    assert (
        "aaaaaaaaaaaa" in message
        and "cccccccccccc" in message
        and "stable" in message
        and "s.yaml" in message
    )
    current = {k.decode(): v.decode() for k, v in (await aredis.hgetall(keys.current_versions)).items()}
    assert current == {"qa": "aaaaaaaaaaaa", "other": "bbbbbbbbbbbb"}  # the refused call wrote nothing
    await register_versions(aredis, keys, [VersionInfo("qa", "eeeeeeeeeeee", None, {"x": 4})], run="shadow")
    assert (await aredis.hget(keys.current_versions, "qa")) == b"aaaaaaaaaaaa"  # a shadow is never current
    assert orjson.loads(await aredis.hget(keys.version_definitions, "qa:eeeeeeeeeeee")) == {"x": 4}
    assert await aredis.hget(keys.version_runs, "qa:eeeeeeeeeeee") == b"shadow"


async def test_alerts_fire_only_on_the_live_version(store: ResultStore, clock: Clock) -> None:
    v1, v2 = await graded(V1), await graded(V2)
    await store.record_many(items(v1) + items(v2))
    rule = AlertRule(name="low", metric="mean_score", comparator="<", threshold=0.99, window=SIZE)
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        await asyncio.sleep(0)
        sent.append(message)

    closer = WindowCloser(
        store,
        [rule],
        allowed_lateness_s=3.0,
        clock=clock.redis,
        live_versions={"qa": v1[0].suite_version or ""},
    )
    clock.now = T0 + SIZE + 3
    assert await closer.run_once(send) == 1
    aggregates = [Aggregate.model_validate_json(m.value) for m in sent if m.kind == "aggregate"]
    alerts = [Alert.model_validate_json(m.value) for m in sent if m.kind == "alert"]
    assert {a.suite_version: a.count for a in aggregates} == {v1[0].suite_version: 6, v2[0].suite_version: 6}
    assert [a.suite_version for a in alerts] == [v1[0].suite_version]
    assert alerts[0].id.endswith(":" + str(v1[0].suite_version))
    # dead-letter rate denominator: the live version's events only
    assert all(a.dead_letter_rate in (None, 0.0) for a in aggregates)


@pytest.fixture
async def api(
    store: ResultStore, aredis: aioredis.Redis, prefix: str
) -> AsyncIterator[tuple[TestClient[Any, Any], str, str]]:
    v1, v2 = await graded(V1), await graded(V2)
    old = [r.model_copy(update={"suite_version": None}) for r in v1]
    await store.record_many(items(v1) + items(v2) + items(old))
    a, b = str(v1[0].suite_version), str(v2[0].suite_version)
    await register_versions(aredis, store.keys, [VersionInfo("qa", a, None, {})], run="live")
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        yield client, a, b


async def get(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_the_api_shows_the_current_version_and_can_pick_others(
    api: tuple[TestClient[Any, Any], str, str],
) -> None:
    client, a, b = api
    [pair] = (await get(client, "/api/v1/stats/pairs"))["data"]
    assert (pair["version"], pair["current"], pair["count"]) == (a, True, 6)
    [pair] = (await get(client, f"/api/v1/stats/pairs?version={b}"))["data"]
    assert (pair["version"], pair["current"]) == (b, False)
    [pair] = (await get(client, "/api/v1/stats/pairs?version=legacy"))["data"]
    assert pair["version"] == ""
    everything = (await get(client, "/api/v1/stats/pairs?version=all"))["data"]
    assert sorted(p["version"] for p in everything) == sorted(["", a, b])
    series = (await get(client, f"/api/v1/stats/windows?size={SIZE}&version={b}"))["data"]["series"]
    assert [s["version"] for s in series] == [b]
    examples = (await get(client, f"/api/v1/stats/examples?model=m&suite=qa&size={SIZE}&version={b}"))["data"]
    assert examples["version"] == b and len(examples["examples"]) > 0
    assert all(e["suite_version"] == b for e in examples["examples"])


async def test_an_unknown_version_is_a_404_naming_the_known_ones(
    api: tuple[TestClient[Any, Any], str, str],
) -> None:
    client, a, b = api
    body = await get(client, "/api/v1/stats/pairs?version=0123456789ab", 404)
    assert sorted(body["data"]["known"]) == sorted([a, b, "legacy"])
    assert a in body["message"] and b in body["message"]
    body = await get(client, f"/api/v1/stats/examples?model=m&suite=qa&size={SIZE}&version=0123456789ab", 404)
    assert a in body["message"]
    await get(client, "/api/v1/stats/pairs?version=nothex", 400)
