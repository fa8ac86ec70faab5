"""Window closing and alerts on the real Redis server, with injected clocks and two racing closers."""

from __future__ import annotations

import asyncio
import statistics

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink

from streameval.alerts import AlertRule
from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.drilldown import ExamplesRecorder, worst_ids
from streameval.models import GradedResult, format_time
from streameval.pipeline import Pipeline
from streameval.stats import confidence_interval, moments
from streameval.store import ResultStore
from streameval.windows import WindowCloser

SUITES = {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
T0 = 1_800_000_000  # a window boundary for 10 s windows
SIZE = 10
LATENESS = 3.0


async def result(event_id: str, output: str, at: float, model: str = "m1") -> GradedResult:
    _, suites = parse_config(SUITES)
    raw = orjson.dumps(
        {"id": event_id, "model": model, "output": output, "expected": "Paris", "timestamp": format_time(at)}
    )
    outcome = await Pipeline(suites).process(raw)
    assert outcome.result is not None
    return outcome.result


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + 1)


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str, clock: Clock) -> ResultStore:
    # with drill-down examples: the alerts list the window's lowest-scored ids
    return ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=LATENESS,
        clock=clock,
        recorders=[ExamplesRecorder()],
    )


def closers(store: ResultStore, clock: Clock, rules: list[AlertRule] = (), n: int = 2) -> list[WindowCloser]:  # type: ignore[assignment]
    return [
        WindowCloser(
            store,
            rules,
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            examples=worst_ids,
        )
        for i in range(n)
    ]


async def record(store: ResultStore, *results: GradedResult) -> None:
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in results])


async def test_two_closers_publish_each_window_once_with_exact_figures(
    store: ResultStore, clock: Clock
) -> None:
    outputs = ["Paris", "London", "Paris", "paris", "Rome"]
    results = [await result(f"e{i}", o, T0 + i) for i, o in enumerate(outputs)]
    results.append(await result("other", "Paris", T0 + 2, model="m2"))
    await record(store, *results)
    sink, pair = Sink(), closers(store, clock)
    clock.now = T0 + SIZE + LATENESS - 0.5  # window ended, lateness not over: not due
    assert sum(await asyncio.gather(*(c.run_once(sink) for c in pair))) == 0
    clock.now = T0 + SIZE + LATENESS
    assert sum(await asyncio.gather(*(c.run_once(sink) for c in pair))) == 1
    assert sum(await asyncio.gather(*(c.run_once(sink) for c in pair))) == 0  # nothing left
    by_model = {a.model: a for a in sink.aggregates()}
    assert sorted(by_model) == ["m1", "m2"] and len(sink.aggregates()) == 2
    m1 = by_model["m1"]
    scores = [r.score for r in results[:5]]
    assert m1.count == 5 and m1.mean == pytest.approx(statistics.fmean(scores), abs=1e-12)
    assert m1.std == pytest.approx(statistics.stdev(scores), abs=1e-9)
    ci = confidence_interval(moments(5, sum(scores), sum(s * s for s in scores)), bounds=(0.0, 1.0))
    assert (m1.ci_low, m1.ci_high) == pytest.approx(ci)
    assert m1.pass_rate == pytest.approx(sum(r.passed for r in results[:5]) / 5)
    assert m1.evaluators["exact_match"].count == 5
    assert m1.window.start == format_time(T0) and m1.window.end == format_time(T0 + SIZE)
    assert m1.latency_p95_ms is not None and m1.late == m1.late_redirected == 0
    sink.check_contracts()


async def test_late_events_within_lateness_count_in_their_window_beyond_it_in_the_open_one(
    store: ResultStore, clock: Clock
) -> None:
    await record(store, await result("on-time", "Paris", T0 + 1))
    clock.now = T0 + SIZE + 1  # after the window's end, within the lateness
    await record(store, await result("late", "Paris", T0 + 5))
    sink, [closer] = Sink(), closers(store, clock, n=1)
    clock.now = T0 + SIZE + LATENESS
    assert await closer.run_once(sink) == 1
    [first] = sink.aggregates()
    assert first.count == 2 and first.late == 1 and first.late_redirected == 0
    clock.now = T0 + SIZE + LATENESS + 1  # the window is published: too late now
    await record(store, await result("too-late", "London", T0 + 6))
    clock.now = T0 + 2 * SIZE + LATENESS
    assert await closer.run_once(sink) == 1
    second = sink.aggregates()[1]
    assert second.window.start == format_time(T0 + SIZE)
    assert second.count == 1 and second.late_redirected == 1
    assert "already closed windows" in second.warnings[0] and not first.warnings
    assert first.count == 2  # the published window is never touched again


async def test_an_event_past_the_watermark_counts_in_the_open_window_even_if_its_own_never_had_data(
    store: ResultStore, clock: Clock
) -> None:
    clock.now = T0 + 5 * SIZE + 1
    await record(store, await result("ancient", "Paris", T0 + 1))  # its window [T0, T0+10) is long past
    sink, [closer] = Sink(), closers(store, clock, n=1)
    clock.now = T0 + 6 * SIZE + LATENESS
    assert await closer.run_once(sink) == 1
    [aggregate] = sink.aggregates()
    assert aggregate.window.start == format_time(T0 + 5 * SIZE)
    assert aggregate.count == 1 and aggregate.late_redirected == 1


RULES = [
    AlertRule(
        name="low-mean",
        metric="mean_score",
        comparator="<",
        threshold=0.9,
        window=SIZE,
        min_count=2,
        severity="critical",
        cooldown_s=25,
    ),
    AlertRule(
        name="needs-many", metric="mean_score", comparator="<", threshold=0.9, window=SIZE, min_count=50
    ),
    AlertRule(name="only-m2", metric="pass_rate", comparator="<=", threshold=1.0, window=SIZE, models=["m2"]),
]


async def test_alerts_fire_once_per_rule_and_window_and_respect_cooldown(
    store: ResultStore, clock: Clock
) -> None:
    sink, pair = Sink(), closers(store, clock, RULES)
    for w in range(4):  # four windows, each with mean 0.5 for m1
        start = T0 + w * SIZE
        clock.now = start + 1
        await record(
            store, await result(f"a{w}", "Paris", start + 1), await result(f"b{w}", "Rome", start + 2)
        )
        clock.now = start + SIZE + LATENESS
        await asyncio.gather(*(c.run_once(sink) for c in pair))
    assert len(sink.aggregates()) == 4
    fired = sink.alerts()
    # 25 s cooldown over 10 s windows: windows 0 and 3 fire (1 and 2 are within 25 s of window 0's firing)
    assert [a.window.start for a in fired] == [format_time(T0), format_time(T0 + 3 * SIZE)]
    alert = fired[0]
    assert (alert.rule, alert.severity, alert.value, alert.count) == ("low-mean", "critical", 0.5, 2)
    assert alert.figures["mean_score"] == 0.5 and alert.min_count == 2 and alert.cooldown_s == 25
    assert alert.examples == ["b0", "a0"]  # the window's results, lowest score first ("Rome" scores 0)
    assert fired[1].examples == ["b3", "a3"]
    sink.check_contracts()


async def test_alert_examples_are_three_of_the_worst_of_its_window(store: ResultStore, clock: Clock) -> None:
    sink, rule = (
        Sink(),
        AlertRule(name="low", metric="mean_score", comparator="<", threshold=0.9, window=SIZE),
    )
    [closer] = closers(store, clock, [rule])[:1]
    right = [await result(f"ok{i}", "Paris", T0 + 1) for i in range(5)]
    wrong = [await result(f"bad{i}", "Rome", T0 + 2) for i in range(4)]
    await record(store, *right, *wrong)
    clock.now = T0 + SIZE + LATENESS
    await closer.run_once(sink)
    [alert] = sink.alerts()
    assert len(alert.examples) == 3 and set(alert.examples) <= {f"bad{i}" for i in range(4)}
    sink.check_contracts()


async def test_alert_windows_must_be_kept(store: ResultStore) -> None:
    rule = AlertRule(name="hourly", metric="alpha", comparator="<", threshold=0.6, window=3600)
    with pytest.raises(ConfigError, match=r"alerts\[0\]\.window"):
        WindowCloser(store, [rule])
