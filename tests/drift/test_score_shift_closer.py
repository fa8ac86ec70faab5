"""Score-shift alerts from the window closer on the real Redis server: one worker and two racing
workers (events split between their stores, windows published by either closer, a backlog of due
windows closed at once) give the same alerts, with the change point, shift and examples."""

from __future__ import annotations

import asyncio
import random

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.drilldown import ExamplesRecorder
from streameval.features.score_shift import ScoreShiftConfig, ScoreShiftStep
from streameval.models import Alert, GradedResult, format_time, parse_time
from streameval.outputs import Publish
from streameval.pipeline import Pipeline
from streameval.store import ResultStore
from streameval.windows import WindowCloser

SIZE, LATENESS, T0 = 10, 2.0, 1_800_000_000
PER_WINDOW, WINDOWS, SHIFT_AT = 25, 40, 24  # the mean drops from 0.7 to 0.5 at window 24
CFG = ScoreShiftConfig(window=SIZE, reference_events=200, arl=100_000, series=["overall", "evaluators"])


async def _results() -> list[GradedResult]:
    """Seeded results whose overall score (and similarity's) is a number drawn around the window's mean."""
    _, suites = parse_config(
        {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "similarity"}]}]}
    )
    pipeline, rng, out = Pipeline(suites), random.Random(11), []
    for w in range(WINDOWS):
        mean = 0.7 if w < SHIFT_AT else 0.5
        for i in range(PER_WINDOW):
            correct = sum(rng.random() < mean for _ in range(10))  # 0..10 letters right of 10: score k/10
            output = "a" * correct + "b" * (10 - correct)
            raw = orjson.dumps(
                {
                    "id": f"w{w}-{i}",
                    "model": "m",
                    "output": output,
                    "expected": "a" * 10,
                    "timestamp": format_time(T0 + w * SIZE + i * SIZE / PER_WINDOW),
                }
            )
            outcome = await pipeline.process(raw)
            assert outcome.result is not None
            out.append(outcome.result)
    return out


class Crash(Exception):
    """A worker dying while it sends (kill -9: the message never reaches the broker)."""


class CrashOnFirstAlert(Sink):
    def __init__(self) -> None:
        super().__init__()
        self.crashed = False

    async def __call__(self, message: Publish) -> None:
        if message.kind == "alert" and not self.crashed:
            self.crashed = True
            raise Crash
        await super().__call__(message)


async def _tick(closer: WindowCloser, sink: Sink) -> None:
    try:
        await closer.run_once(sink)
    except Crash:  # that tick died; the next one (any worker's) takes over
        pass


async def _run(
    aredis: aioredis.Redis,
    prefix: str,
    results: list[GradedResult],
    workers: int,
    sink: Sink | None = None,
    *,
    resolves: bool = False,
) -> list[Alert]:
    clock, sink = Clock(float(T0)), sink or Sink()
    stores = [
        ResultStore(
            aredis,
            prefix=prefix,
            windows=(SIZE,),
            allowed_lateness_s=LATENESS,
            clock=clock,
            recorders=[ExamplesRecorder()],  # a shift alert lists the window's lowest-scored ids
        )
        for _ in range(workers)
    ]
    closers = [
        WindowCloser(
            s,
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=[ScoreShiftStep(CFG, s.windows, resolves=resolves)],
        )
        for i, s in enumerate(stores)
    ]
    by_window: dict[int, list[GradedResult]] = {}
    for r in results:
        by_window.setdefault(int(r.id.split("-")[0][1:]), []).append(r)
    for w in range(WINDOWS):
        clock.now = T0 + w * SIZE + 1
        for i, r in enumerate(by_window[w]):  # events split between the workers' stores
            await stores[i % workers].record(r, r.model_dump_json().encode())
        if w % 7 == 6:  # a backlog: several due windows closed by racing closers at once
            clock.now = T0 + (w + 1) * SIZE + LATENESS
            await asyncio.gather(*(_tick(c, sink) for c in closers))
    clock.now = T0 + (WINDOWS + 1) * SIZE + LATENESS
    for _ in range(3):
        await asyncio.gather(*(_tick(c, sink) for c in closers))
    return sink.alerts()


async def test_an_alert_whose_send_died_is_sent_by_the_next_try(aredis: aioredis.Redis, prefix: str) -> None:
    """The first alert's send dies before the broker has it: a later fold sends the same alert (same id);
    nothing is lost, nothing else changes."""
    results = await _results()
    want = await _run(aredis, prefix + "whole:", results, 1)
    cut = CrashOnFirstAlert()
    got = await _run(aredis, prefix + "cut:", results, 1, cut)
    assert cut.crashed and want
    assert sorted(a.id for a in got) == sorted(a.id for a in want)
    assert sorted(map(orjson.dumps, map(_comparable, got))) == sorted(
        map(orjson.dumps, map(_comparable, want))
    )


def _comparable(alert: Alert) -> dict[str, object]:
    doc = orjson.loads(alert.model_dump_json())
    doc.pop("fired_at")
    return doc


async def test_two_workers_give_the_alerts_of_one(aredis: aioredis.Redis, prefix: str) -> None:
    results = await _results()
    one = await _run(aredis, prefix + "one:", results, 1)
    two = await _run(aredis, prefix + "two:", results, 2)
    assert sorted(map(orjson.dumps, map(_comparable, one))) == sorted(
        map(orjson.dumps, map(_comparable, two))
    )
    series = {a.change.series for a in one if a.change}
    assert series == {"overall", "evaluator:similarity"}, [a.message for a in one]
    for alert in one:
        assert alert.metric == "score_shift" and alert.change is not None
        assert alert.change.direction == "down"
        assert alert.change.shift == pytest.approx(-0.2, abs=0.08)
        change_window = int(parse_time(alert.change.start) - T0) // SIZE
        assert SHIFT_AT - 3 <= change_window <= SHIFT_AT + 3
        assert alert.change.event_id is not None and alert.change.event_id.startswith(f"w{change_window}-")
        assert alert.examples and all(e.startswith("w") for e in alert.examples)
        assert alert.window.start >= alert.change.start
        assert alert.value > alert.threshold
    # one alert per series: the reference is learnt again after it
    assert len(one) == len(series)
    print(one[0].message)


async def test_with_notify_a_shift_alert_resolves_once_the_detector_is_back_in_control(
    aredis: aioredis.Redis, prefix: str
) -> None:
    results = await _results()
    sink = Sink()
    alerts = await _run(aredis, prefix, results, 2, sink, resolves=True)
    firing = [a for a in alerts if a.status == "firing"]
    resolved = [a for a in alerts if a.status == "resolved"]
    assert {a.change.series for a in firing if a.change} == {"overall", "evaluator:similarity"}
    # each alert resolved once, by its detector: the new level learnt as the reference, then a window in control
    assert sorted(a.id for a in resolved) == sorted(a.id for a in firing), [a.message for a in alerts]
    relearnt = CFG.reference_events // PER_WINDOW * SIZE
    for alert in resolved:
        fired = next(a for a in firing if a.id == alert.id)
        assert alert.resolution == "in_control"
        assert parse_time(alert.window.start) >= parse_time(fired.window.start) + relearnt
        assert alert.message.startswith(f"resolved: {fired.change.series} of m / qa is back in control")  # type: ignore[union-attr]
        assert alerts.index(alert) > alerts.index(fired)
    sink.check_contracts()


async def test_without_notify_no_shift_state_is_kept(aredis: aioredis.Redis, prefix: str) -> None:
    alerts = await _run(aredis, prefix, await _results(), 1)
    assert alerts and all(a.status == "firing" for a in alerts)
    assert [k async for k in aredis.scan_iter(match=f"{prefix}*firing*")] == []


async def test_the_window_must_be_kept(aredis: aioredis.Redis, prefix: str) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,))
    with pytest.raises(ConfigError, match=r"windowing\.score_shift\.window"):
        ScoreShiftStep(ScoreShiftConfig(window=60), store.windows)
