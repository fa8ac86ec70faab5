"""Shadow candidates on the real Redis: same events, own version and figures, marked results, sampling by
event-id hash, nothing counted twice on redelivery, live figures unchanged (docs/versions.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import add_shadow_file, parse_config_text, shadow_routings
from streameval.errors import ConfigError
from streameval.judges import sampled
from streameval.models import GradedResult
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.store import ResultStore

LIVE = """
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}]
    shadow:
      - {label: soft, evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}], threshold: 0.5}
      - {sample_rate: 0.5, threshold: 0.9}
"""
OUTPUTS = ["Paris", "Pariss", "London", "paris", "Paris!", "Lyon", "Paris", "Rome"]


def batch(run: str) -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps({"id": f"{run}-{i}", "model": "m", "output": o, "expected": "Paris"}),
            Source("evals.requests", 0, i),
        )
        for i, o in enumerate(OUTPUTS)
    ]


def processor(store: ResultStore, text: str = LIVE) -> tuple[Processor, str, list[str]]:
    _, suites = parse_config_text(textwrap.dedent(text))
    shadows = [
        Pipeline(r, result_marks={"shadow": True}, judge_budget_scope="~shadow")
        for r in shadow_routings(suites)
    ]
    qa = suites.by_name["qa"]
    return (
        Processor(Pipeline(suites), store, shadows=shadows),
        qa.version,
        [s.suite.version for s in qa.shadows],
    )


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str) -> ResultStore:
    return ResultStore(aredis, prefix=prefix, windows=(60,))


async def test_shadows_score_the_same_events_under_their_own_versions(store: ResultStore) -> None:
    proc, live, (soft, strict) = processor(store)
    run = "s1"
    messages = await proc.process_batch(batch(run))
    results = [GradedResult.model_validate_json(m.value) for m in messages]
    by_version: dict[str | None, list[GradedResult]] = {}
    for r in results:
        by_version.setdefault(r.suite_version, []).append(r)
    assert [r.id for r in by_version[live]] == [f"{run}-{i}" for i in range(len(OUTPUTS))]
    assert all(r.shadow is None for r in by_version[live])  # live results: no shadow key at all
    assert all(b'"shadow"' not in m.value for m in messages[: len(OUTPUTS)])
    assert len(by_version[soft]) == len(OUTPUTS) and all(r.shadow for r in by_version[soft])
    sampled_ids = [f"{run}-{i}" for i in range(len(OUTPUTS)) if sampled(f"shadow:{run}-{i}", 0.5)]
    assert [r.id for r in by_version[strict]] == sampled_ids
    assert all(r.threshold == 0.9 for r in by_version[strict])
    # figures: each version its own, each event once; a redelivered batch counts nothing
    await proc.process_batch(batch(run))
    counts = {a.version: a.count for a in await store.all_time()}
    assert counts == {
        live: len(OUTPUTS),
        soft: len(OUTPUTS),
        **({strict: len(sampled_ids)} if sampled_ids else {}),
    }
    exact = {a.version: a for a in await store.all_time()}
    assert exact[live].fields["passes"] == sum(r.passed for r in by_version[live])
    assert exact[soft].fields["sum"] == pytest.approx(sum(r.score for r in by_version[soft]))


async def test_live_figures_do_not_change_with_a_shadow(aredis: aioredis.Redis, prefix: str) -> None:
    with_shadow = ResultStore(aredis, prefix=prefix + "a:", windows=(60,))
    without = ResultStore(aredis, prefix=prefix + "b:", windows=(60,))
    proc, live, _ = processor(with_shadow)
    plain, live_too, none = processor(without, LIVE.split("    shadow:")[0])
    assert live == live_too and none == []  # shadows are not part of the live version
    await proc.process_batch(batch("s2"))
    await plain.process_batch(batch("s2"))
    a = {x.version: x.fields for x in await with_shadow.all_time()}[live]
    b = {x.version: x.fields for x in await without.all_time()}[live]
    # the latency histogram's buckets (lat:N) follow the wall clock, not the events: the same count
    latency = [name for name in a.keys() | b.keys() if name.startswith("lat:")]
    assert (
        latency and sum(a.get(n, 0.0) for n in latency) == sum(b.get(n, 0.0) for n in latency) == a["count"]
    )
    assert {n: v for n, v in a.items() if n not in latency} == {
        n: v for n, v in b.items() if n not in latency
    }


def test_a_shadow_identical_to_the_live_suite_is_refused() -> None:
    text = LIVE.replace("threshold: 0.9", "threshold: 0.6")
    with pytest.raises(ConfigError) as caught:
        parse_config_text(textwrap.dedent(text))
    assert "suites[0].shadow[1]" in str(caught.value) and "must change something" in str(caught.value)


def test_a_shadow_file_adds_candidates_by_suite_name(tmp_path: Path) -> None:
    _, suites = parse_config_text(textwrap.dedent(LIVE.split("    shadow:")[0]))
    candidate = tmp_path / "shadow.yaml"
    candidate.write_text("suites:\n  - {name: qa, threshold: 0.8, evaluators: [{evaluator: exact_match}]}\n")
    add_shadow_file(suites, candidate, sample_rate=0.25)
    [shadow] = suites.by_name["qa"].shadows
    assert shadow.sample_rate == 0.25 and shadow.suite.config.threshold == 0.8
    assert shadow.suite.version != suites.by_name["qa"].version
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("suites:\n  - {name: nope, evaluators: [{evaluator: exact_match}]}\n")
    with pytest.raises(ConfigError, match="nope"):
        add_shadow_file(suites, unknown)


def test_shadows_have_a_judge_budget_of_their_own() -> None:
    from streameval.judges import JudgeCache, JudgeConfig, JudgeHub

    cfg = JudgeConfig(
        name="j1",
        protocol="openai",
        base_url="http://127.0.0.1:1/v1",
        model="m",
        weight=1.0,
        budget_per_hour=1.0,
        price_input_per_mtok=1.0,
    )
    cache = JudgeCache(aioredis.Redis(), prefix="p:")
    live, shadow = JudgeHub([cfg], cache=cache), JudgeHub([cfg], cache=cache, budget_scope="~shadow")
    live_money, shadow_money = live.judges["j1"].money, shadow.judges["j1"].money
    assert live_money is not None and shadow_money is not None
    assert live_money.key(1) != shadow_money.key(1) and shadow_money.key(1).endswith("~shadow:1")
