"""Backpressure: the judged share halves while consumer lag or the judge queue is over a bound."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from _judges_helpers import judge
from prometheus_client import REGISTRY
from pydantic import ValidationError

from streameval.config import parse_config
from streameval.judges import sampled
from streameval.judges._pressure import Backpressure, BackpressureConfig
from streameval.judges.sim import start_judge_sim
from streameval.pipeline import Pipeline


def test_levels_go_down_over_a_bound_and_back_up_when_calm() -> None:
    now, lag = [0.0], [0]
    bp = Backpressure(
        "bp-unit",
        BackpressureConfig(max_lag=1000, min_share=0.1, interval_s=1.0),
        queued=lambda: 0,
        lag=lambda: lag[0],
        clock=lambda: now[0],
    )
    shares = []
    for value in (5000, 5000, 5000, 5000, 5000, 800, 400, 400, 400, 400, 400):
        lag[0] = value
        shares.append(bp.share())
        assert bp.share() == shares[-1]  # at most one change per interval
        now[0] += 1.0
    # halves while over, floored at min_share; holds between half the bound and the bound; recovers under half
    assert shares == [0.5, 0.25, 0.125, 0.1, 0.1, 0.1, 0.125, 0.25, 0.5, 1.0, 1.0]
    assert "lag 5000 > 1000" in bp.why
    assert REGISTRY.get_sample_value("streameval_judge_judged_share", {"suite": "bp-unit"}) == 1.0


def test_a_lower_share_judges_a_subset_of_the_same_events() -> None:
    ids = [f"ev-{i}" for i in range(2000)]
    for rate, share in ((1.0, 0.5), (0.5, 0.25), (0.3, 0.1)):
        high = {i for i in ids if sampled(i, rate)}
        low = {i for i in ids if sampled(i, rate * share)}
        assert low <= high and abs(len(low) / len(ids) - rate * share) < 0.05


def test_backpressure_needs_a_bound() -> None:
    with pytest.raises(ValidationError, match="max_lag and/or max_queue"):
        BackpressureConfig()


async def test_a_judge_queue_over_its_bound_skips_events_with_the_reason() -> None:
    """One slot, 30 ms answers, 60 events at once: the queue passes 2 and the share drops."""
    async with start_judge_sim(latency_ms=30) as url:
        _, suites = parse_config(
            {
                "judges": [
                    judge("bp", url, weight=1, max_concurrency=1, adaptive_concurrency=False).model_dump()
                ],
                "suites": [
                    {
                        "name": "bp-suite",
                        "default": True,
                        "evaluators": [{"evaluator": "exact_match"}],
                        "judge": {
                            "consistency_rate": 0,
                            "backpressure": {"max_queue": 2, "min_share": 0.25, "interval_s": 0.001},
                        },
                    }
                ],
            }
        )
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            raws = [
                orjson.dumps(
                    {
                        "id": f"ev-{uuid.uuid4().hex}",
                        "model": "m",
                        "output": f"Paris {n}",
                        "expected": "Paris",
                    }
                )
                for n in range(60)
            ]
            first = [asyncio.ensure_future(pipeline.process(raw)) for raw in raws[:20]]
            assert pipeline.judges is not None
            [bp] = pipeline.judges.panel(None)
            deadline = asyncio.get_running_loop().time() + 10
            while bp.client.queued <= 2:  # the first burst fills the judge's queue
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.005)
            rest = [asyncio.ensure_future(pipeline.process(raw)) for raw in raws[20:]]
            outcomes: list[Any] = await asyncio.gather(*first, *rest)
        finally:
            await pipeline.close()
    blocks = [o.result.judge for o in outcomes]
    skipped = [b for b in blocks if b.reason.startswith("skipped: backpressure")]
    judged = [b for b in blocks if b.status != "unsampled"]
    assert skipped and judged and len(skipped) + len(judged) == 60
    assert all(b.status == "unsampled" and "judge queue" in b.reason for b in skipped)
    counted = [o.counters.get("judge_panel", {}).get("skip:backpressure", 0) for o in outcomes]
    assert sum(counted) == len(skipped)
    # rule scores are kept for skipped events
    assert all(o.result.evaluators[0].name == "exact_match" for o in outcomes)
    assert REGISTRY.get_sample_value(
        "streameval_judge_backpressure_skips_total", {"suite": "bp-suite"}
    ) == len(skipped)


def test_the_aggregate_carries_judge_calls_cost_and_backpressure_skips() -> None:
    from jsonschema import Draft202012Validator

    from streameval import schemas
    from streameval.aggregates import build_aggregate

    c = "ev:judge_panel:c:"
    fields = {
        "count": 10.0,
        "sum": 5.0,
        "sumsq": 3.0,
        f"{c}a.calls": 6.0,
        f"{c}a.repeat_calls": 1.0,
        f"{c}a.cache_hits": 3.0,
        f"{c}a.cost": 0.0125,
        f"{c}a.n": 7.0,
        f"{c}a.score_sum": 50.0,
        f"{c}a.score_sumsq": 400.0,
        f"{c}b.calls": 4.0,
        f"{c}b.n": 4.0,
        f"{c}b.score_sum": 20.0,
        f"{c}b.score_sumsq": 110.0,
        f"{c}skip:backpressure": 3.0,
    }
    aggregate = build_aggregate(
        "m", "s", 60, 0, fields, {}, dead_letters=0, window_events=10, published_at="2026-11-23T10:00:00Z"
    )
    assert aggregate.judges["a"].calls == 7 and aggregate.judges["a"].cache_hits == 3
    assert aggregate.judges["a"].cost == pytest.approx(0.0125) and aggregate.judges["b"].cost is None
    assert aggregate.judge_cost == pytest.approx(0.0125) and aggregate.backpressure_skips == 3
    assert set(aggregate.judges) == {"a", "b"}
    doc = orjson.loads(aggregate.model_dump_json())
    assert not list(Draft202012Validator(schemas.load("aggregate")).iter_errors(doc))
