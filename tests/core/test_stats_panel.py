"""Judge-panel statistics: per-event counters -> window figures, against numpy and krippendorff.

Also: z-score panel aggregation, consistency re-judging (deterministic, cache bypassed) end to end with
the simulated judge, and the window aggregate built from real Redis counters.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import krippendorff
import numpy as np
import orjson
import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.aggregates import build_aggregate, judge_norms
from streameval.config import parse_config
from streameval.judges import (
    JudgeCache,
    agreement_counters,
    judge_counters,
    panel_score,
    rejudged,
    repeat_counters,
    zscore_panel_score,
)
from streameval.judges.sim import demo_judges, start_judge_sim
from streameval.models import GradedResult, JudgeVerdict
from streameval.outputs import Publish
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor
from streameval.stats import Moments, moments
from streameval.store import ResultStore
from streameval.windows import WindowCloser

JUDGES = ("a", "b", "c")
WEIGHTS = {"a": 0.3, "b": 0.3, "c": 0.4}


def verdict(name: str, score: float | None) -> JudgeVerdict:
    status = "ok" if score is not None else "error"
    return JudgeVerdict(
        name=name,
        model=f"m-{name}",
        weight=WEIGHTS[name],
        status=status,
        prompt="standard",
        scale="0-10",
        score=score,
        error=None if score is not None else "timeout",
    )


def fields_of(units: list[list[int | None]]) -> dict[str, float]:
    """A window hash as the store would hold it after these events (one unit per event)."""
    out: dict[str, float] = {"count": float(len(units)), "sum": 0.0, "sumsq": 0.0}
    for unit in units:
        verdicts = [verdict(j, None if s is None else float(s)) for j, s in zip(JUDGES, unit, strict=True)]
        for name, value in judge_counters(verdicts).items():
            out[f"ev:judge_panel:c:{name}"] = out.get(f"ev:judge_panel:c:{name}", 0.0) + value
        for name, value in agreement_counters([verdicts]).items():
            out[f"ev:judge_panel:c:{name}"] = out.get(f"ev:judge_panel:c:{name}", 0.0) + value
    return out


def aggregate_of(units: list[list[int | None]]) -> Any:
    return build_aggregate(
        "m",
        "s",
        60,
        0,
        fields_of(units),
        {},
        dead_letters=0,
        window_events=len(units),
        published_at="2026-11-21T10:00:00Z",
    )


unit_lists = st.lists(
    st.lists(st.one_of(st.none(), st.integers(0, 10)), min_size=3, max_size=3), min_size=2, max_size=30
)


@settings(max_examples=150, deadline=None)
@given(unit_lists)
def test_window_alpha_equals_the_krippendorff_package(units: list[list[int | None]]) -> None:
    aggregate = aggregate_of(units)
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    if len({v for u in pairable for v in u if v is not None}) < 2:
        assert aggregate.alpha is None
        return
    data = np.array([[np.nan if v is None else v for v in u] for u in units], dtype=float).T
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert aggregate.alpha == pytest.approx(reference, abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(unit_lists)
def test_window_pearson_per_pair_and_judge_moments_equal_numpy(units: list[list[int | None]]) -> None:
    aggregate = aggregate_of(units)
    for i, a in enumerate(JUDGES):
        scores = [u[i] for u in units if u[i] is not None]
        figures = aggregate.judges.get(a)
        if not scores:
            assert figures is None or figures.n == 0
            continue
        assert figures.n == len(scores) and figures.mean == pytest.approx(np.mean(scores), abs=1e-9)
        if len(scores) >= 2:
            assert figures.std == pytest.approx(np.std(scores, ddof=1), abs=1e-6)
        assert figures.errors == sum(u[i] is None for u in units)
        for j in range(i + 1, len(JUDGES)):
            both = [(u[i], u[j]) for u in units if u[i] is not None and u[j] is not None]
            key = f"{a}|{JUDGES[j]}"
            x = np.array([p[0] for p in both], dtype=float)
            y = np.array([p[1] for p in both], dtype=float)
            if len(both) < 2 or x.std() == 0 or y.std() == 0:
                assert aggregate.judge_pearson.get(key) is None
            else:
                assert aggregate.judge_pearson[key] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)


def test_judge_error_rate_is_errors_over_asked() -> None:
    aggregate = aggregate_of([[5, None, 7], [6, 6, None], [None, None, 9]])
    assert aggregate.judge_error_rate == pytest.approx(4 / 9)


def test_repeat_counters_give_the_consistency_correlation_and_warn_below_0_8() -> None:
    firsts = [[verdict("a", s), verdict("b", s + 1)] for s in (1.0, 4.0, 7.0, 9.0)]
    repeats = [
        [verdict("a", r), verdict("b", r2)] for r, r2 in ((9.0, 2.0), (1.0, 5.0), (4.0, 8.0), (7.0, 10.0))
    ]
    fields: dict[str, float] = {"count": 4.0}
    for first, repeat in zip(firsts, repeats, strict=True):
        for name, value in repeat_counters(first, repeat).items():
            fields[f"ev:judge_panel:c:{name}"] = fields.get(f"ev:judge_panel:c:{name}", 0.0) + value
    aggregate = build_aggregate(
        "m", "s", 60, 0, fields, {}, dead_letters=0, window_events=4, published_at="2026-11-21T10:00:00Z"
    )
    x = [v.score for f in firsts for v in f]
    y = [v.score for r in repeats for v in r]
    assert aggregate.consistency_n == 8
    assert aggregate.consistency == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)
    assert aggregate.consistency < 0.8 and "consistency" in aggregate.warnings[0]
    assert fields["ev:judge_panel:c:a.repeat_calls"] == 4


def test_seed_003_zscore_example() -> None:
    # the multi-judge spec: DeepSeek mean 4.2 std 0.5, GLM mean 3.8 std 0.6; 4.5 -> z 0.6, 4.2 -> z 0.67
    norms = {"a": Moments(100, 4.2, 0.5), "b": Moments(100, 3.8, 0.6)}
    weights = {"a": 0.5, "b": 0.5}
    verdicts = [
        JudgeVerdict(name=n, model=n, weight=weights[n], status="ok", prompt="standard", scale="1-5", score=s)
        for n, s in (("a", 4.5), ("b", 4.2))
    ]
    z = (0.6 + (4.2 - 3.8) / 0.6) / 2
    assert zscore_panel_score(verdicts, norms, 30) == pytest.approx(4.0 + z * 0.55, abs=1e-6)


@pytest.mark.parametrize(
    ("norms", "why"),
    [
        ({"a": Moments(5, 4.0, 1.0), "b": Moments(100, 4.0, 1.0)}, "too few scores"),
        ({"a": Moments(100, 4.0, 0.0), "b": Moments(100, 4.0, 1.0)}, "zero std"),
        ({"b": Moments(100, 4.0, 1.0)}, "no norm"),
    ],
)
def test_zscore_needs_usable_norms(norms: dict[str, Moments], why: str) -> None:
    assert zscore_panel_score([verdict("a", 5.0), verdict("b", 6.0)], norms, 30) is None, why


@given(st.floats(1, 9), st.floats(0.5, 3), st.lists(st.floats(0, 10), min_size=3, max_size=3))
def test_zscore_with_identical_norms_is_the_weighted_mean(
    mean: float, std: float, scores: list[float]
) -> None:
    norms = {j: Moments(100, mean, std) for j in JUDGES}
    verdicts = [verdict(j, s) for j, s in zip(JUDGES, scores, strict=True)]
    assert zscore_panel_score(verdicts, norms, 30) == pytest.approx(panel_score(verdicts), abs=1e-5)


def test_judge_norms_pool_every_pair() -> None:
    one = {
        "ev:judge_panel:c:a.n": 2.0,
        "ev:judge_panel:c:a.score_sum": 10.0,
        "ev:judge_panel:c:a.score_sumsq": 52.0,
    }
    two = {
        "ev:judge_panel:c:a.n": 1.0,
        "ev:judge_panel:c:a.score_sum": 8.0,
        "ev:judge_panel:c:a.score_sumsq": 64.0,
    }
    assert judge_norms([one, two])["a"] == moments(3, 18.0, 116.0)


def test_rejudging_is_deterministic_and_near_the_rate() -> None:
    ids = [f"e{i}" for i in range(20000)]
    chosen = [i for i in ids if rejudged(i, 0.1)]
    assert chosen == [i for i in ids if rejudged(i, 0.1)]
    assert abs(len(chosen) / len(ids) - 0.1) < 0.01
    assert not any(rejudged(i, 0.0) for i in ids[:100])


async def test_panel_counters_reach_redis_and_the_window_figures(aredis: aioredis.Redis, prefix: str) -> None:
    requests: list[dict[str, Any]] = []
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    outputs = [
        "The capital of France is Paris.",
        "Paris",
        "It is Lyon.",
        "Berlin",
        "paris, France",
        "no idea",
    ]
    async with start_judge_sim(requests=requests) as url:
        _, suites = parse_config(
            {
                "judges": demo_judges(url),
                "suites": [
                    {
                        "name": "s",
                        "default": True,
                        "evaluators": [{"evaluator": "exact_match"}],
                        "judge": {"consistency_rate": 1.0},
                    }
                ],
            }
        )
        pipeline = Pipeline(suites, judge_cache=JudgeCache(aredis, prefix=prefix))
        await pipeline.start()
        try:
            scores: list[list[float]] = []
            for output in outputs:
                raw = orjson.dumps(
                    {
                        "id": f"ev-{uuid.uuid4().hex}",
                        "model": "m",
                        "output": output,
                        "expected": "Paris",
                        "category": "qa_simple",
                    }
                )
                outcome = await pipeline.process(raw)
                assert outcome.result is not None and outcome.result.judge is not None
                scores.append([v.score for v in outcome.result.judge.judges])  # type: ignore[misc]
                await store.record(
                    outcome.result, outcome.result.model_dump_json().encode(), outcome.counters
                )
        finally:
            await pipeline.close()
    assert len(requests) == 2 * 3 * len(outputs)  # every event re-judged, the repeat never from the cache
    [window] = [a for a in await store.all_time()]
    aggregate = build_aggregate(
        "m",
        "s",
        60,
        0,
        window.fields,
        window.fields,
        dead_letters=0,
        window_events=len(outputs),
        published_at="2026-11-21T10:00:00Z",
    )
    data = np.array(scores, dtype=float).T
    expected_alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert aggregate.alpha == pytest.approx(expected_alpha, abs=1e-9)
    assert aggregate.consistency_n == 3 * len(outputs)
    assert aggregate.consistency == pytest.approx(1.0)  # the simulated judge is deterministic
    assert aggregate.tokens["prompt"] > 0 and aggregate.judge_error_rate == 0.0
    assert all(j.drift == pytest.approx(0.0) for j in aggregate.judges.values() if j.drift is not None)
    assert not math.isnan(aggregate.judge_pearson["sim-deepseek|sim-glm"] or 0.0)


async def test_the_closing_tick_refreshes_norms_and_zscore_takes_over(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    outputs = ["Paris", "Lyon is the capital", "Berlin", "The capital is Paris", "Paris!", "Rome", "Paris"]
    async with start_judge_sim() as url:
        _, suites = parse_config(
            {
                "judges": demo_judges(url),
                "suites": [
                    {
                        "name": "s",
                        "default": True,
                        "evaluators": [{"evaluator": "exact_match"}],
                        "judge": {"aggregation": "zscore", "zscore_min_n": 3, "consistency_rate": 0},
                    }
                ],
            }
        )
        pipeline = Pipeline(suites)
        processor = Processor(pipeline, store)
        await processor.start()
        closer = WindowCloser(store)

        async def ignore(message: Publish) -> None:
            return None

        reasons = []
        try:
            for output in outputs:
                raw = orjson.dumps(
                    {
                        "id": f"ev-{uuid.uuid4().hex}",
                        "model": "m",
                        "output": output,
                        "expected": "Paris",
                        "category": "qa_simple",
                    }
                )
                [message] = await processor.process_batch([(raw, Source())])
                judge = GradedResult.model_validate_json(message.value).judge
                assert judge is not None
                reasons.append(judge.reason)
                await processor.close_windows(closer, ignore)
        finally:
            await processor.close()
    assert pipeline.judges is not None
    norms = pipeline.judges.norms
    assert set(norms) == {"sim-deepseek", "sim-glm", "sim-minimax"} and norms["sim-glm"].n == len(outputs)
    assert "z-score norms not ready" in reasons[0]
    assert any("z-score panel" in r for r in reasons[3:]), reasons
