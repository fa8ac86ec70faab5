"""Usage per slice and a slice's budget, with the wiring the worker uses (streameval.features.setup): the
suite file's segments:, prices: and budgets:, its annotators, recorders and window steps, on real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink

from streameval.config import parse_config
from streameval.features.setup import annotators, enabled, record_plugins, window_steps
from streameval.models import format_time
from streameval.pipeline import Pipeline
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.usage_figures import COARSE, bucket, bucket_value
from streameval.windows import WindowCloser

SIZE, T0, LATENESS = 10, 1_800_000_000, 3.0
CONFIG: dict[str, Any] = {
    "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
    "segments": {"dimensions": {"tier": "metadata.tier"}},
    "prices": {"currency": "USD", "models": {"m*": {"input": 1.0, "output": 4.0}}},
    "budgets": [
        {
            "name": "gold-hour",
            "scope": {"segment": {"dimension": "tier", "value": "gold"}},
            "period": "hour",
            "limit": 0.01,
            "currency": "USD",
            "warn_at": [0.5],
            "burn_rate": False,
        }
    ],
}
# tier, model, input tokens, output tokens; cost = (in × 1 + out × 4) / 10^6
EVENTS = [
    ("gold", "m1", 1000, 500),  # 0.003
    ("gold", "m2", 2000, 250),  # 0.003
    ("free", "m1", 4000, 1000),  # 0.008
    ("free", "m1", 1000, 0),  # 0.001
]


async def test_usage_per_slice_and_a_slices_budget(aredis: aioredis.Redis, prefix: str) -> None:
    _, suites = parse_config(CONFIG)
    pipeline = Pipeline(suites, annotators=annotators(suites))
    clock = Clock(T0 + 2)
    on = enabled(Settings(), suites)
    stores = [
        ResultStore(
            aredis,
            prefix=prefix,
            windows=(SIZE,),
            allowed_lateness_s=LATENESS,
            clock=clock,
            recorders=record_plugins(on),
        )
        for _ in range(2)
    ]
    batch = []
    for i, (tier, model, tokens_in, tokens_out) in enumerate(EVENTS):
        raw = orjson.dumps(
            {
                "id": f"e{i}",
                "model": model,
                "output": "x",
                "timestamp": format_time(T0 + 1),
                "metadata": {"tier": tier},
                "usage": {
                    "input_tokens": tokens_in,
                    "output_tokens": tokens_out,
                    "duration_ms": 100 * (i + 1),
                },
            }
        )
        outcome = await pipeline.process(raw)
        assert outcome.result is not None
        batch.append(
            (outcome.result, outcome.result.model_dump_json().encode(), None, raw, outcome.annotations)
        )
    await asyncio.gather(*(s.record_many(batch) for s in stores))  # two workers, the same batch: once

    sink = Sink()
    closers = [
        WindowCloser(
            s,
            [],
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=window_steps(suites, (SIZE,)),
        )
        for i, s in enumerate(stores)
    ]
    clock.now = T0 + SIZE + LATENESS + 1
    await asyncio.gather(*(c.run_once(sink) for c in closers))
    sink.check_contracts()
    found = {(a.model, a.segment.value if a.segment else None): a.usage for a in sink.aggregates()}
    m1_gold, m1_free, m1 = found[("m1", "gold")], found[("m1", "free")], found[("m1", None)]
    assert m1_gold is not None and m1_free is not None and m1 is not None
    assert (m1_gold.events, m1_gold.input_tokens, m1_gold.cost) == (1, 1000, pytest.approx(0.003))
    assert (m1_free.events, m1_free.output_tokens, m1_free.cost) == (2, 1000, pytest.approx(0.009))
    assert m1.cost == pytest.approx(0.012) and m1.currency == "USD" and m1_free.currency == "USD"
    # durations: the pair's in fine buckets (±5.9 %), each slice's in coarse ones (±12.2 %; docs/usage.md)
    assert m1_gold.duration_p50_ms == bucket_value(bucket(100.0, COARSE), COARSE)  # e0 took 100 ms
    assert abs(m1_gold.duration_p50_ms / 100.0 - 1) <= 0.123
    assert m1.duration_p99_ms == bucket_value(bucket(400.0))  # e3, the slowest of m1
    assert found[("m2", "gold")] is not None and found[("m2", "gold")].cost == pytest.approx(0.003)

    # the gold tier spent 0.006 of 0.01 across both models this hour: its 0.5 level alerts, once
    alerts = [a for a in sink.alerts() if a.metric == "budget_spend"]
    assert [(a.rule, a.id.rsplit(":", 1)[1], a.value) for a in alerts] == [
        ("gold-hour", "0.5", pytest.approx(0.006))
    ]
    assert alerts[0].segment is not None and alerts[0].segment.value == "gold"
