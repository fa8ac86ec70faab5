"""Slices at window close (docs/segments.md): each slice's aggregate on the aggregates topic with its
``segment``, the pair's own aggregate byte-identical to a worker without slices, and the alert rules with
``segments:`` firing per slice that breaks them (``min_count`` keeps small slices quiet), once."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink
from test_slices_record import SIZE, SUITE, T0, World, event

from streameval.alerts import AlertRule
from streameval.features.segments import OTHER, SlicesStep
from streameval.features.setup import window_steps
from streameval.windows import WindowCloser

RULE = {"name": "low", "metric": "mean_score", "comparator": "<", "threshold": 0.9, "window": SIZE}


def suite_file(segments: bool, rules: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {"suites": [SUITE], "alerts": rules}
    if segments:
        data["segments"] = {"max_values": 2, "dimensions": {"tier": "metadata.tier", "plan": "tag:plan:"}}
    return data


async def close(aredis: aioredis.Redis, prefix: str, data: dict[str, Any]) -> Sink:
    clock = Clock(T0 + 2)
    world = World(aredis, prefix, data, [T0 + 2])
    world.store.clock = clock
    await world.record(
        event(0, "gold", tags=["plan:pro"]),
        event(1, "gold", output="Rome", tags=["plan:pro"]),
        event(2, "free", output="Rome"),
        event(3, "team"),  # a third value: (other), max_values is 2
        event(4, "team", output="Rome"),
    )
    rules = [AlertRule.model_validate(r) for r in data["alerts"]]
    closer = WindowCloser(
        world.store,
        rules,
        allowed_lateness_s=3.0,
        clock=clock.redis,
        worker_id="w",
        steps=window_steps(world.suites, (SIZE,)),
    )
    clock.now = T0 + SIZE + 3
    sink = Sink()
    assert await closer.run_once(sink) == 1
    sink.check_contracts()
    return sink


async def test_slice_aggregates_beside_a_byte_identical_pair_aggregate(
    aredis: aioredis.Redis, prefix: str
) -> None:
    plain = await close(aredis, prefix + "a:", suite_file(False, []))
    sliced = await close(aredis, prefix + "b:", suite_file(True, []))
    assert plain.messages[0] == sliced.messages[0]  # the pair's own, first, unchanged
    parts = {(a.segment.dimension, a.segment.value): a for a in sliced.aggregates()[1:] if a.segment}
    assert len(parts) == len(sliced.messages) - 1
    assert {k: (a.count, a.pass_rate) for k, a in parts.items()} == {
        ("plan", "(missing)"): (3, pytest.approx(1 / 3)),
        ("plan", "pro"): (2, 0.5),
        ("tier", "free"): (1, 0.0),
        ("tier", "gold"): (2, 0.5),
        ("tier", OTHER): (2, 0.5),
    }
    gold = parts[("tier", "gold")]
    assert gold.ci_low is not None and gold.ci_low < gold.mean < (gold.ci_high or 0)
    assert gold.model == "m1" and gold.suite == "qa" and gold.window.size_s == SIZE


async def test_a_rule_with_segments_fires_per_slice_above_min_count(
    aredis: aioredis.Redis, prefix: str
) -> None:
    rules = [
        {**RULE, "segments": ["tier"], "min_count": 2},
        {**RULE, "name": "pair-low", "threshold": 0.1},  # no segments: the pair (mean 0.4) does not fire it
    ]
    sink = await close(aredis, prefix, suite_file(True, rules))
    alerts = sink.alerts()
    assert sorted((a.rule, a.segment.value if a.segment else None) for a in alerts) == [
        ("low", "(other)"),
        ("low", "gold"),  # free broke it too, with 1 event: below min_count
    ]
    gold = next(a for a in alerts if a.segment and a.segment.value == "gold")
    assert "tier = gold" in gold.message and gold.id.endswith(":tier=gold") and gold.count == 2


async def test_a_slice_alert_is_sent_once(aredis: aioredis.Redis, prefix: str) -> None:
    data = suite_file(True, [{**RULE, "segments": ["tier"], "min_count": 2}])
    sink = await close(aredis, prefix, data)
    suites_world = World(aredis, prefix, data, [T0 + 2])
    [step] = [s for s in window_steps(suites_world.suites, (SIZE,)) if isinstance(s, SlicesStep)]
    assert len(sink.alerts()) == 2
    # the window again (a repeat after a crash before the lease was marked done): the claims say sent
    clock = Clock(T0 + SIZE + 3)
    suites_world.store.clock = clock
    rule = AlertRule.model_validate(data["alerts"][0])
    closer = WindowCloser(suites_world.store, [rule], allowed_lateness_s=3.0, clock=clock.redis, steps=[step])
    again = Sink()
    await closer._publish(SIZE, T0, clock.now, again)
    assert again.aggregates() and not again.alerts()
