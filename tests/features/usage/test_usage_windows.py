"""Usage figures and spend recorded with the record call on the real Redis server: once under redelivery and
two racing workers, read back by the closer's step as the aggregate's ``usage``, and alert metrics on them."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink

from streameval.alerts import METRICS, AlertRule, figures
from streameval.config import parse_config
from streameval.features.usage import (
    BudgetConfig,
    Budgets,
    PricesConfig,
    UsageAnnotator,
    UsageRecorder,
    UsageStep,
    period_field,
)
from streameval.models import GradedResult, RequestEvent, format_time
from streameval.pipeline import Pipeline
from streameval.store import ResultStore
from streameval.usage_figures import bucket, bucket_value
from streameval.windows import WindowCloser

SIZE, T0, LATENESS = 10, 1_800_000_000, 3.0
PRICES = PricesConfig.model_validate(
    {"currency": "USD", "models": {"m1": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}}
)
DAY = BudgetConfig.model_validate(
    {"name": "m1-day", "scope": {"model": "m1"}, "period": "day", "limit": 1.0, "currency": "USD"}
)
SUITES = {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}


def usage(i: int) -> dict[str, Any]:
    return {
        "input_tokens": 1000 * (i + 1),
        "cached_input_tokens": 500 * i,
        "output_tokens": 100 * (i + 1),
        "reasoning_tokens": 10 * i,
        "duration_ms": 100.0 * (i + 1),
        "finish_reason": ["stop", "length", "weird"][i % 3],
    }


async def graded(i: int, model: str) -> tuple[RequestEvent, GradedResult, bytes]:
    _, suites = parse_config(SUITES)
    fields = {"id": f"e{i}-{model}", "model": model, "output": "Paris", "expected": "Paris"}
    raw = orjson.dumps({**fields, "timestamp": format_time(T0 + 1 + i * 0.1), "usage": usage(i)})
    outcome = await Pipeline(suites).process(raw)
    assert outcome.result is not None
    return RequestEvent.model_validate_json(raw), outcome.result, raw


def entries(events: list[tuple[RequestEvent, GradedResult, bytes]]) -> list[Any]:
    notes = UsageAnnotator(PRICES)
    return [(r, r.model_dump_json().encode(), None, raw, {"usage": notes.note(e)}) for e, r, raw in events]


def store(aredis: aioredis.Redis, prefix: str, clock: Clock, budgets: Budgets | None = None) -> ResultStore:
    return ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=LATENESS,
        clock=clock,
        recorders=[UsageRecorder("USD", budgets)],
    )


async def test_usage_is_counted_once_and_read_into_the_aggregate(aredis: aioredis.Redis, prefix: str) -> None:
    clock = Clock(T0 + 2)
    budgets = Budgets((DAY,))
    first, second = store(aredis, prefix, clock, budgets), store(aredis, prefix, clock, budgets)
    events = [await graded(i, "m1") for i in range(6)] + [await graded(i, "m2") for i in range(3)]
    batch = entries(events)
    # two workers record the same batch at once, then one of them gets it again (a redelivery)
    await asyncio.gather(first.record_many(batch), second.record_many(batch))
    await first.record_many(batch[2:5])

    sink = Sink()
    closer = WindowCloser(
        first,
        [],
        allowed_lateness_s=LATENESS,
        worker_id="w",
        clock=clock.redis,
        steps=[UsageStep("USD", budgets)],
    )
    clock.now = T0 + SIZE + LATENESS + 1
    await closer.run_once(sink)
    sink.check_contracts()
    by_model = {a.model: a for a in sink.aggregates()}

    # recount by hand: m1 is priced (input 2, output 8, cached 0.5 per million), m2 is not
    m1 = by_model["m1"].usage
    assert m1 is not None
    expected_cost = 0.0
    for i in range(6):
        u = usage(i)
        expected_cost += (
            (u["input_tokens"] - u["cached_input_tokens"]) * 2.0
            + u["cached_input_tokens"] * 0.5
            + u["output_tokens"] * 8.0  # reasoning at the output price
        ) / 1e6
    assert m1.events == 6 and m1.priced == 6 and m1.unpriced == 0
    assert m1.input_tokens == sum(usage(i)["input_tokens"] for i in range(6))
    assert m1.cached_input_tokens == sum(usage(i)["cached_input_tokens"] for i in range(6))
    assert m1.reasoning_tokens == sum(usage(i)["reasoning_tokens"] for i in range(6))
    assert m1.cost == pytest.approx(expected_cost, rel=1e-12)
    assert m1.cost_per_event == pytest.approx(expected_cost / 6, rel=1e-12)
    assert m1.finish_reasons == {"stop": 2, "length": 2, "(other)": 2}
    durations = sorted(100.0 * (i + 1) for i in range(6))
    exact_p50 = durations[2]  # the 3rd of 6 (nearest rank)
    assert m1.duration_p50_ms == bucket_value(bucket(exact_p50))
    assert abs(m1.duration_p50_ms / exact_p50 - 1) <= 0.06  # docs/usage.md: within ±5.9 %
    assert m1.currency == "USD"

    m2 = by_model["m2"].usage
    assert m2 is not None and m2.events == 3
    assert (m2.priced, m2.unpriced, m2.cost, m2.cost_per_event) == (0, 3, 0.0, None)  # never $0 per event

    # spend of the day, counted once too (the budget's period on UTC)
    version = by_model["m1"].suite_version or ""
    pair = first.pair_id("m1", "qa", version)
    spend = await aredis.hget(first.keys.spend(pair), period_field("day", "UTC", T0 + 1))
    assert spend is not None and float(spend) == pytest.approx(expected_cost, rel=1e-12)
    assert (
        await aredis.exists(first.keys.spend(first.pair_id("m2", "qa", version))) == 0
    )  # no budget covers m2

    # the alert metrics read them; the figures of an alert carry them
    aggregate = by_model["m1"]
    assert METRICS["cost"](aggregate) == pytest.approx(expected_cost)
    assert METRICS["unpriced"](by_model["m2"]) == 3.0
    assert METRICS["length_finish_rate"](aggregate) == pytest.approx(2 / 6)
    assert "duration_p95_ms" in figures(aggregate)


async def test_without_usage_nothing_is_added(aredis: aioredis.Redis, prefix: str) -> None:
    clock = Clock(T0 + 2)
    s = store(aredis, prefix, clock)
    _, suites = parse_config(SUITES)
    raw = orjson.dumps({"id": "x", "model": "m1", "output": "a", "timestamp": format_time(T0 + 1)})
    outcome = await Pipeline(suites).process(raw)
    assert outcome.result is not None
    await s.record_many([(outcome.result, b"{}", None, raw, None)])
    pair = s.pair_id("m1", "qa", outcome.result.suite_version or "")
    packed = await s.client.hget(s.keys.window(pair, SIZE, T0), "~")
    assert packed is not None and b"use:" not in packed
    sink = Sink()
    closer = WindowCloser(
        s, [], allowed_lateness_s=LATENESS, worker_id="w", clock=clock.redis, steps=[UsageStep("USD", None)]
    )
    clock.now = T0 + SIZE + LATENESS + 1
    await closer.run_once(sink)
    (aggregate,) = sink.aggregates()
    assert aggregate.usage is None and "usage" not in orjson.loads(sink.messages[0][1])
    assert "cost" not in figures(aggregate)  # an alert without usage carries the figures it always did


def test_usage_alert_metrics_are_rule_metrics() -> None:
    for metric in (
        "cost",
        "cost_per_event",
        "unpriced",
        "duration_p95_ms",
        "ttft_p95_ms",
        "length_finish_rate",
    ):
        AlertRule.model_validate(
            {"name": "r", "metric": metric, "comparator": ">", "threshold": 1, "window": SIZE}
        )
    assert math.isclose(bucket_value(bucket(1000.0)) / 1000.0, 1.0, rel_tol=0.06)


async def test_budget_alerts_once_per_crossing_with_two_workers_and_resolve_at_rollover(
    aredis: aioredis.Redis, prefix: str
) -> None:
    clock = Clock(T0 + 2)  # 2027-01-15 08:00 UTC: a third of the day gone
    events = [await graded(i, "m1") for i in range(6)]
    notes = [UsageAnnotator(PRICES).note(e) for e, _, _ in events]
    first_cost = sum(n.cost for n in notes[:4] if n is not None and n.cost is not None)
    total = sum(n.cost for n in notes if n is not None and n.cost is not None)
    limit = first_cost / 0.85  # the first four cross 0.8 of it, all six the whole of it
    assert total >= limit
    budget = DAY.model_copy(update={"limit": limit})
    budgets = Budgets((budget,))
    stores = [store(aredis, prefix, clock, budgets) for _ in range(2)]
    closers = [
        WindowCloser(
            s,
            [],
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=[UsageStep("USD", budgets)],
        )
        for i, s in enumerate(stores)
    ]
    sink = Sink()

    async def tick_both() -> list[tuple[str, str, str]]:
        before = len(sink.alerts())
        await asyncio.gather(*(c.run_once(sink) for c in closers))
        await asyncio.gather(*(c.run_once(sink) for c in closers))  # and again: nothing new
        return sorted((a.id.rsplit(":", 1)[1], a.status, a.metric) for a in sink.alerts()[before:])

    await stores[0].record_many(entries(events[:4]))
    assert await tick_both() == [("0.8", "firing", "budget_spend"), ("burn", "firing", "budget_burn_rate")]
    burn = next(a for a in sink.alerts() if a.metric == "budget_burn_rate")
    assert "at this rate the daily budget" in burn.message and "is gone at" in burn.message
    assert burn.value == pytest.approx(first_cost)

    await asyncio.gather(*(s.record_many(entries(events)) for s in stores))  # both workers, two new events
    assert await tick_both() == [("1", "firing", "budget_spend")]
    crossed = sink.alerts()[-1]
    assert crossed.severity == "critical" and crossed.value == pytest.approx(total)
    assert crossed.model == "m1" and crossed.suite == "*" and crossed.window.size_s == 86400

    clock.now = T0 + 86400  # the next day: what fired yesterday resolves, once
    assert await tick_both() == [
        ("0.8", "resolved", "budget_spend"),
        ("1", "resolved", "budget_spend"),
        ("burn", "resolved", "budget_burn_rate"),
    ]
    sink.check_contracts()
