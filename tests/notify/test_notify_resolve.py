"""The window closer resolves a rule x pair that fired once a later window no longer fires it (real Redis)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink

from streameval.alerts import AlertRule
from streameval.config import parse_config
from streameval.features.notify import ResolveStep
from streameval.models import GradedResult, format_time
from streameval.pipeline import Pipeline
from streameval.store import ResultStore
from streameval.windows import WindowCloser

SUITES = {"suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
T0 = 1_800_000_000  # a window boundary for 10 s windows
SIZE = 10
LATENESS = 3.0


async def result(event_id: str, output: str, at: float) -> GradedResult:
    _, suites = parse_config(SUITES)
    raw = orjson.dumps(
        {"id": event_id, "model": "m1", "output": output, "expected": "Paris", "timestamp": format_time(at)}
    )
    outcome = await Pipeline(suites).process(raw)
    assert outcome.result is not None
    return outcome.result


async def record(store: ResultStore, *results: GradedResult) -> None:
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in results])


RULE = AlertRule(
    name="low-mean", metric="mean_score", comparator="<", threshold=0.6, window=SIZE, min_count=2
)


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + 1)


@pytest.fixture
def store(aredis: aioredis.Redis, prefix: str, clock: Clock) -> ResultStore:
    return ResultStore(aredis, prefix=prefix, windows=(SIZE,), allowed_lateness_s=LATENESS, clock=clock)


async def close_windows(
    store: ResultStore, clock: Clock, outputs: list[str], *, resolve: bool = True
) -> Sink:
    """One window per entry of ``outputs`` ("bad": mean 0.5, "good": mean 1, "few": one event), closed by two
    racing closers."""
    sink = Sink()
    closers = [
        WindowCloser(
            store,
            [RULE],
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=[ResolveStep([RULE])] if resolve else [],
        )
        for i in range(2)
    ]
    for w, kind in enumerate(outputs):
        start = T0 + w * SIZE
        clock.now = start + 1
        second = "Rome" if kind == "bad" else "Paris"
        events = [await result(f"a{w}", "Paris", start + 1)]
        if kind != "few":
            events.append(await result(f"b{w}", second, start + 2))
        await record(store, *events)
        clock.now = start + SIZE + LATENESS
        await asyncio.gather(*(c.run_once(sink) for c in closers))
    return sink


async def test_a_later_window_that_no_longer_fires_resolves_once(store: ResultStore, clock: Clock) -> None:
    sink = await close_windows(store, clock, ["bad", "bad", "few", "good", "good", "bad", "good"])
    statuses = [(a.status, a.window.start[-9:-5]) for a in sink.alerts()]
    # fires in windows 0, 1, 5; "few" (under min_count) is not evaluated; resolves in 3 and 6, once each
    assert [s for s, _ in statuses] == ["firing", "firing", "resolved", "firing", "resolved"]
    alerts = sink.alerts()
    first_resolve = alerts[2]
    assert first_resolve.id == alerts[1].id  # the resolve carries the id of the alert it ends
    assert first_resolve.window.start == alerts[1].window.start.replace(":10.", ":30.")  # window 3
    assert first_resolve.value == 1.0 and first_resolve.message.startswith("resolved: mean_score 1")
    assert alerts[4].id == alerts[3].id
    sink.check_contracts()  # the resolve is a valid alert v1 (status is optional, backward compatible)


async def test_without_notify_nothing_is_resolved_nor_kept(
    store: ResultStore, clock: Clock, aredis: aioredis.Redis, prefix: str
) -> None:
    sink = await close_windows(store, clock, ["bad", "good"], resolve=False)
    assert [a.status for a in sink.alerts()] == ["firing"]
    assert [k async for k in aredis.scan_iter(match=f"{prefix}*firing*")] == []


async def run_closers(store: ResultStore, clock: Clock, sink: Sink, rule: AlertRule, at: float) -> None:
    clock.now = at
    closers = [
        WindowCloser(
            store,
            [rule],
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=[ResolveStep([rule])],
        )
        for i in range(2)
    ]
    await asyncio.gather(*(c.run_once(sink) for c in closers))


async def test_a_pair_that_stops_receiving_events_resolves_after_the_empty_windows(
    store: ResultStore, clock: Clock
) -> None:
    rule = RULE.model_copy(update={"resolve_after_empty": 2})
    sink = Sink()
    clock.now = T0 + 1
    await record(store, await result("a0", "Paris", T0 + 1), await result("b0", "Rome", T0 + 2))
    await run_closers(store, clock, sink, rule, T0 + SIZE + LATENESS)
    [fired] = sink.alerts()
    # windows 1 and 2 are empty; the resolve waits until both are over (and nothing older is unpublished)
    await run_closers(store, clock, sink, rule, T0 + 3 * SIZE - 0.5)
    assert [a.status for a in sink.alerts()] == ["firing"]
    # one event (under min_count) in window 1 is an event: the pair is not silent, the wait starts again
    clock.now = T0 + SIZE + 1
    await record(store, await result("c1", "Paris", T0 + SIZE + 1))
    await run_closers(store, clock, sink, rule, T0 + 3 * SIZE + 0.5)
    assert [a.status for a in sink.alerts()] == ["firing"]
    await run_closers(store, clock, sink, rule, T0 + 4 * SIZE + LATENESS)
    alerts = sink.alerts()
    assert [(a.status, a.resolution) for a in alerts] == [("firing", None), ("resolved", "no_events")]
    resolve = alerts[1]
    assert resolve.id == fired.id and resolve.count == 0
    assert resolve.window.start == format_time(T0 + 3 * SIZE) and resolve.window.end == format_time(
        T0 + 4 * SIZE
    )
    assert resolve.message == (
        f"resolved: no events for m1 / qa in the 2 window(s) of {SIZE}s from {format_time(T0 + 2 * SIZE)} "
        f"to {format_time(T0 + 4 * SIZE)}"
    )
    await run_closers(store, clock, sink, rule, T0 + 9 * SIZE)  # once: its state is forgotten
    assert len(sink.alerts()) == 2
    sink.check_contracts()


async def test_a_rule_without_resolve_after_empty_stays_firing(store: ResultStore, clock: Clock) -> None:
    rule = RULE.model_copy(update={"resolve_after_empty": None})
    sink = Sink()
    clock.now = T0 + 1
    await record(store, await result("a0", "Paris", T0 + 1), await result("b0", "Rome", T0 + 2))
    await run_closers(store, clock, sink, rule, T0 + SIZE + LATENESS)
    await run_closers(store, clock, sink, rule, T0 + 50 * SIZE)
    assert [a.status for a in sink.alerts()] == ["firing"]


async def test_a_recovered_resolve_says_so(store: ResultStore, clock: Clock) -> None:
    sink = await close_windows(store, clock, ["bad", "good"])
    assert [(a.status, a.resolution) for a in sink.alerts()] == [("firing", None), ("resolved", "recovered")]
    firing, resolved = [v for k, v in sink.messages if k == "alert"]
    assert b'"resolution"' not in firing  # a firing alert is written as before (the field is absent)
    assert orjson.loads(resolved)["resolution"] == "recovered"


async def test_a_detectors_next_alarm_supersedes_its_firing_alert(store: ResultStore) -> None:
    from _notify_helpers import alert

    from streameval.features._firing import Firing

    firing, sink = Firing(store), Sink()
    key = firing.key(store.pair_id("gpt-4o", "qa", ""), "score_shift:overall", 60)
    first = alert(id="score_shift:overall:60:a:gpt-4o:qa", rule="score_shift", metric="score_shift")
    second = first.model_copy(update={"id": "score_shift:overall:60:b:gpt-4o:qa"})
    await firing.replace(key, first, None, T0, sink)
    await firing.replace(key, first, None, T0, sink)  # a fold repeated after a crash: nothing more
    assert sink.alerts() == []
    await firing.replace(key, second, None, T0, sink)
    [ended] = sink.alerts()
    assert (ended.id, ended.status, ended.resolution) == (first.id, "resolved", "superseded")
    assert ended.message == f"resolved: superseded by {second.id}"
    assert (await firing.get(key)) == second
    sink.check_contracts()
