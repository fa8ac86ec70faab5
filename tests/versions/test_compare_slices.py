"""Version comparison per slice (docs/versions.md, docs/segments.md) on the real Redis: a live version and its
shadow, both sliced by the suite file's ``segments:``; ``GET /api/v1/stats/compare`` with ``dimension`` answers
per value what a recount from the published results and the events' metadata gives, ``value`` compares one
slice only; without ``segments:`` the compact scores carry no slice values (the chunks are as before)."""

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
from streameval.features.compare import (
    SLICES_MARK,
    CompactScoresRecorder,
    compact,
    compare_slices,
    pack_chunk,
    pack_slices,
    unpack_chunks,
)
from streameval.features.setup import annotators, enabled, record_plugins
from streameval.features.web import dashboard_features
from streameval.models import GradedResult
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.settings import Settings
from streameval.store import ResultStore

SUITES = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}, {evaluator: contains, weight: 0}]
    shadow:
      - evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}, {evaluator: contains, weight: 0}]
        threshold: 0.5
"""
SEGMENTS = """
segments:
  dimensions:
    tier: metadata.tier
"""
# (output, tier): the shadow's similarity passes near misses exact_match fails, so the versions disagree
EVENTS = [
    ("Paris", "free"),
    ("Pariss", "free"),
    ("London", "free"),
    ("paris", "free"),
    ("Paris!", "pro"),
    ("Lyon", "pro"),
    ("Paris", "pro"),
    ("Rome", "enterprise"),
    ("Parus", "enterprise"),
    ("P", None),  # no tier: (missing)
]


def batch(run: str) -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps(
                {
                    "id": f"{run}-{i}",
                    "model": "m",
                    "output": o,
                    "expected": "Paris",
                    "metadata": {} if tier is None else {"tier": tier},
                }
            ),
            Source("evals.requests", 0, i),
        )
        for i, (o, tier) in enumerate(EVENTS)
    ]


def tier_of(event_id: str) -> str:
    return EVENTS[int(event_id.rsplit("-", 1)[1])][1] or "(missing)"


async def world(
    aredis: aioredis.Redis, prefix: str, text: str
) -> tuple[TestClient[Any, Any], Processor, str, str]:
    _, suites = parse_config_text(textwrap.dedent(text))
    on = enabled(Settings(), suites)
    assert on.compare_ttl_s  # a shadow: compact scores are kept
    store = ResultStore(aredis, prefix=prefix, windows=(60,), recorders=record_plugins(on))
    shadows = [
        Pipeline(r, result_marks={"shadow": True}, annotators=annotators(suites))
        for r in shadow_routings(suites)
    ]
    proc = Processor(Pipeline(suites, annotators=annotators(suites)), store, shadows=shadows)
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    client = TestClient(TestServer(app))
    await client.start_server()
    return client, proc, suites.by_name["qa"].version, suites.by_name["qa"].shadows[0].suite.version


@pytest.fixture
async def sliced(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[tuple[Any, ...]]:
    client, proc, live, shadow = await world(aredis, prefix, SUITES + SEGMENTS)
    try:
        yield client, proc, live, shadow
    finally:
        await client.close()


async def get(client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_compare_per_slice_equals_a_recount_of_the_published_results(sliced: Any) -> None:
    client, proc, live, shadow = sliced
    messages = await proc.process_batch(batch("s1"))
    messages += await proc.process_batch(batch("s1"))  # redelivered: counted once, per slice too
    results = [GradedResult.model_validate_json(m.value) for m in messages]
    a = {r.id: r for r in results if r.suite_version == live}
    b = {r.id: r for r in results if r.suite_version == shadow}
    assert len(a) == len(b) == len(EVENTS)
    body = (await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&dimension=tier"))[
        "data"
    ]
    assert body["dimension"] == "tier" and body["n"] == len(EVENTS) and "slices_reason" not in body
    rows = {row["value"]: row for row in body["slices"]}
    assert set(rows) == {"free", "pro", "enterprise", "(missing)"}
    for value, row in rows.items():
        ids = [i for i in a if tier_of(i) == value]
        assert row["n"] == row["n_a"] == row["n_b"] == len(ids)
        assert row["pass_rate_a"] == pytest.approx(sum(a[i].passed for i in ids) / len(ids))
        assert row["pass_rate_b"] == pytest.approx(sum(b[i].passed for i in ids) / len(ids))
        assert row["mean_a"] == pytest.approx(sum(a[i].score for i in ids) / len(ids), abs=1e-6)
        assert row["mean_diff"] == pytest.approx(
            sum(b[i].score - a[i].score for i in ids) / len(ids), abs=1e-6
        )
        assert sorted(row["pass_to_fail_ids"]) == sorted(i for i in ids if a[i].passed and not b[i].passed)
        assert sorted(row["fail_to_pass_ids"]) == sorted(i for i in ids if b[i].passed and not a[i].passed)
        assert row["fail_to_pass"] == len(row["fail_to_pass_ids"])
    assert sum(r["fail_to_pass"] for r in rows.values()) == body["fail_to_pass"] > 0
    diffs = [r["mean_diff"] for r in body["slices"]]
    assert diffs == sorted(diffs)  # the largest drop first

    one = (
        await get(
            client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&dimension=tier&value=free"
        )
    )["data"]
    assert one["value"] == "free" and "slices" not in one
    assert {k: one[k] for k in ("n", "mean_diff", "pass_to_fail", "fail_to_pass", "pass_rate_b")} == {
        k: rows["free"][k] for k in ("n", "mean_diff", "pass_to_fail", "fail_to_pass", "pass_rate_b")
    }
    nobody = (
        await get(
            client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&dimension=tier&value=vip"
        )
    )["data"]
    assert nobody["n"] == 0 and nobody["empty"] is True
    unknown = (
        await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&dimension=region")
    )["data"]
    assert unknown["slices"] == [] and "region" in unknown["slices_reason"] and unknown["n"] == len(EVENTS)
    await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&value=free", 400)


async def test_without_segments_no_slice_values_are_kept(aredis: aioredis.Redis, prefix: str) -> None:
    client, proc, live, shadow = await world(aredis, prefix, SUITES)
    try:
        await proc.process_batch(batch("s2"))
        keys = [k async for k in aredis.scan_iter(match=f"{prefix}*:sc:*")]
        assert keys
        for key in keys:
            data = await aredis.get(key)
            assert SLICES_MARK.to_bytes(4, "big") not in data  # score chunks only, as before slices
            slices: dict[str, dict[str, str]] = {}
            assert len(unpack_chunks(data, slices=slices)) == len(EVENTS) and slices == {}
        body = (
            await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={live}&b={shadow}&dimension=tier")
        )["data"]
        assert body["slices"] == [] and "segments:" in body["slices_reason"]
    finally:
        await client.close()


def test_slice_chunks_round_trip_and_are_skipped_by_a_reader_that_asks_none() -> None:
    rows = [(f"e{i}", 1000 + i, 0.1 * i, i % 2 == 0, [(0.5, True)]) for i in range(5)]
    values = [("free", "v1"), ("pro", "v1"), ("free", "v2"), (), ("x" * 128, "v1")]
    data = pack_chunk(rows[:3]) + pack_slices(("tier", "release"), values[:3])
    data += pack_chunk(rows[3:]) + pack_slices(("tier", "release"), values[3:])
    data += pack_chunk([("late", 2000, 1.0, True, [])])  # a chunk written without slices
    data += pack_chunk(rows[:1]) + pack_slices(("tier", "release"), [("pro", "v9")])  # a redelivery
    slices: dict[str, dict[str, str]] = {}
    records = unpack_chunks(data, slices=slices)
    assert records == unpack_chunks(data)  # the scores are the same with or without slice values
    assert set(records) == {"e0", "e1", "e2", "e3", "e4", "late"}
    assert slices == {
        "e0": {"tier": "free", "release": "v1"},  # the first record's
        "e1": {"tier": "pro", "release": "v1"},
        "e2": {"tier": "free", "release": "v2"},
        "e3": {"tier": "(missing)", "release": "(missing)"},
        "e4": {"tier": "x" * 128, "release": "v1"},
    }
    window: dict[str, dict[str, str]] = {}
    assert set(unpack_chunks(data, since=1001, until=1003, slices=window)) == {"e1", "e2"}
    assert set(window) == {"e1", "e2"}


def test_compare_slices_folds_the_least_common_values_into_other() -> None:
    a = {f"e{i}": compact(0, 0.5, True, []) for i in range(10)}
    b = {f"e{i}": compact(0, 0.25 if i < 6 else 0.5, i >= 6, []) for i in range(10)}
    of = {f"e{i}": "big" if i < 6 else f"small{i}" for i in range(10)}
    rows = compare_slices(a, b, of, max_values=3)
    # the two most common values kept (ties by name), the rest together; the largest drop first
    assert [(r["value"], r["n"]) for r in rows] == [("big", 6), ("(other)", 3), ("small6", 1)]
    assert rows[0]["pass_to_fail"] == 6 and rows[0]["mean_diff"] == pytest.approx(-0.25)


async def test_a_live_version_without_slices_compares_per_slice_with_a_sliced_one(
    aredis: aioredis.Redis, prefix: str
) -> None:
    """The live worker kept compact scores without segments:; a later run of another version (a backfill's
    store: the same recorder) slices: the comparison takes each event's value from the version that has it."""
    _, live_suites = parse_config_text(textwrap.dedent(SUITES.split("    shadow:")[0]))
    _, new_suites = parse_config_text(
        textwrap.dedent(SUITES.split("    shadow:")[0].replace("threshold: 0.6", "threshold: 0.9") + SEGMENTS)
    )
    live = ResultStore(aredis, prefix=prefix, windows=(60,), recorders=[CompactScoresRecorder(3 * 86400)])
    sliced = ResultStore(
        aredis,
        prefix=prefix,
        windows=(60,),
        recorders=[CompactScoresRecorder(3 * 86400, dimensions=("tier",))],
    )
    a = [
        GradedResult.model_validate_json(m.value)
        for m in await Processor(Pipeline(live_suites), live).process_batch(batch("bf"))
    ]
    pipeline = Pipeline(new_suites, annotators=annotators(new_suites))
    b = [
        GradedResult.model_validate_json(m.value)
        for m in await Processor(pipeline, sliced).process_batch(batch("bf"))
    ]
    va, vb = live_suites.by_name["qa"].version, new_suites.by_name["qa"].version
    assert va != vb
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        body = (await get(client, f"/api/v1/stats/compare?model=m&suite=qa&a={va}&b={vb}&dimension=tier"))[
            "data"
        ]
    rows = {r["value"]: r for r in body["slices"]}
    assert {v: r["n"] for v, r in rows.items()} == {"free": 4, "pro": 3, "enterprise": 2, "(missing)": 1}
    by_a, by_b = {r.id: r for r in a}, {r.id: r for r in b}
    for value, row in rows.items():
        ids = [i for i in by_a if tier_of(i) == value]
        assert row["pass_to_fail"] == sum(by_a[i].passed and not by_b[i].passed for i in ids)
