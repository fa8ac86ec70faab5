"""Embedding drift on the real Redis server: the outputs' vectors of each window, through the pipeline,
the record script and the window closer. One worker and two racing workers give the same alerts; a
topic shift (weather reports, then code) raises one alert at the shift, a stable stream none; the sums
do not depend on how the events were split; the Redis bytes of a pair × window are bounded."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import yaml
from _closer_helpers import Clock, Sink
from _semantic_extra import need_extra

from streameval import telemetry
from streameval.config import parse_config_text
from streameval.envelope import Outcome, Source
from streameval.errors import ConfigError
from streameval.features.embedding_drift import KEY as DRIFT
from streameval.features.embedding_drift import DriftRecorder
from streameval.features.embedding_drift._step import DriftStep
from streameval.features.setup import annotators, window_steps
from streameval.models import Alert, format_time
from streameval.store import ResultStore
from streameval.windows import WindowCloser

SIZE, LATENESS, T0 = 10, 2.0, 1_800_000_000
PER_WINDOW, WINDOWS, SHIFT_AT = 20, 18, 11

CITIES = ["Paris", "London", "Berlin", "Madrid", "Rome", "Oslo", "Lisbon", "Vienna", "Dublin", "Prague"]
CONDITIONS = ["light rain", "sunshine", "heavy clouds", "strong winds", "snow showers", "fog", "clear skies"]
WHEN = ["this morning", "tomorrow", "tonight", "on Sunday", "later today", "over the weekend"]
NAMES = ["total", "parse", "merge", "load", "scale", "count", "clean", "split"]


def weather(rng: random.Random) -> str:
    return (
        f"{rng.choice(CITIES)} expects {rng.choice(CONDITIONS)} {rng.choice(WHEN)}, "
        f"with temperatures near {rng.randint(-5, 35)} degrees."
    )


def code(rng: random.Random) -> str:
    arg = rng.choice(["x", "items", "data", "rows"])
    return (
        f"def {rng.choice(NAMES)}_{rng.randint(1, 99)}({arg}):\n"
        f"    return [v {rng.choice(['+', '*', '-'])} {rng.randint(1, 9)} for v in {arg}]"
    )


def _config(**drift: Any) -> str:
    settings = {"window": SIZE, "reference_events": 100, "min_events": 10, **drift}
    return yaml.safe_dump(
        {
            "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "similarity"}]}],
            "windowing": {"embedding_drift": settings},
        }
    )


_OUTCOMES: dict[int, list[list[Outcome]]] = {}


def _outcomes(shift_at: int) -> list[list[Outcome]]:
    """Per window, its events' outcomes through the pipeline's batch step (drift numbers included)."""
    if shift_at in _OUTCOMES:
        return _OUTCOMES[shift_at]
    from streameval.pipeline import Pipeline

    _, suites = parse_config_text(_config())
    pipeline, rng, out = (
        Pipeline(suites, annotators=annotators(suites, embed_outputs=True)),
        random.Random(7),
        [],
    )
    for w in range(WINDOWS):
        make: Callable[[random.Random], str] = weather if w < shift_at else code
        batch = [
            (
                orjson.dumps(
                    {
                        "id": f"w{w}-{i}",
                        "model": "m",
                        "output": make(rng),
                        "expected": "a weather report",
                        "timestamp": format_time(T0 + w * SIZE + i * SIZE / PER_WINDOW),
                    }
                ),
                Source(),
            )
            for i in range(PER_WINDOW)
        ]
        found = pipeline.process_sync_batch(batch, received_at=T0 + w * SIZE)
        assert all(
            o is not None and o.result is not None and o.annotations.get(DRIFT) is not None for o in found
        )
        out.append([o for o in found if o is not None])
    _OUTCOMES[shift_at] = out
    return out


def _version() -> str:
    result = _outcomes(SHIFT_AT)[0][0].result
    assert result is not None and result.suite_version
    return result.suite_version


async def _run(
    aredis: aioredis.Redis,
    prefix: str,
    windows: list[list[Outcome]],
    workers: int,
    seed: int = 3,
    *,
    resolves: bool = False,
) -> list[Alert]:
    _, suites = parse_config_text(_config())
    cfg = suites.windowing.embedding_drift
    assert cfg is not None
    clock, sink, rng = Clock(float(T0)), Sink(), random.Random(seed)
    stores = []
    for _ in range(workers):
        store = ResultStore(
            aredis,
            prefix=prefix,
            windows=(SIZE,),
            allowed_lateness_s=LATENESS,
            clock=clock,
            recorders=[DriftRecorder(cfg)],
        )
        stores.append(store)
    closers = [
        WindowCloser(
            s,
            allowed_lateness_s=LATENESS,
            worker_id=f"w{i}",
            clock=clock.redis,
            steps=[DriftStep(cfg, s.windows, resolves=resolves)],
        )
        for i, s in enumerate(stores)
    ]
    for w, outcomes in enumerate(windows):
        clock.now = T0 + w * SIZE + 1
        shares: list[list[Outcome]] = [[] for _ in range(workers)]
        for o in outcomes:  # events split between the workers at random, recorded in batches of 1-7
            shares[rng.randrange(workers)].append(o)
        for store, share in zip(stores, shares, strict=True):
            for first in range(0, len(share), step := rng.randint(1, 7)):
                items = [
                    (o.result, o.result.model_dump_json().encode(), o.counters, b"", o.annotations)
                    for o in share[first : first + step]
                    if o.result is not None
                ]
                await store.record_many(items)
        if w % 5 == 4:  # a backlog: several due windows closed by racing closers at once
            clock.now = T0 + (w + 1) * SIZE + LATENESS
            await asyncio.gather(*(c.run_once(sink) for c in closers))
    clock.now = T0 + (len(windows) + 1) * SIZE + LATENESS
    for _ in range(3):
        await asyncio.gather(*(c.run_once(sink) for c in closers))
    return sink.alerts()


def _comparable(alert: Alert) -> bytes:
    doc = orjson.loads(alert.model_dump_json())
    doc.pop("fired_at")
    return orjson.dumps(doc)


async def test_two_workers_give_the_alerts_of_one(aredis: aioredis.Redis, prefix: str) -> None:
    need_extra()
    windows = _outcomes(SHIFT_AT)
    one = await _run(aredis, prefix + "one:", windows, 1)
    two = await _run(aredis, prefix + "two:", windows, 2, seed=4)
    assert sorted(map(_comparable, one)) == sorted(map(_comparable, two))
    assert len(one) == 1, [a.message for a in one]  # one alert: the reference is learnt again after it
    [alert] = one
    assert alert.metric == alert.rule == "embedding_drift"
    assert alert.window.start == format_time(T0 + SHIFT_AT * SIZE)
    assert alert.figures["centroid_distance"] is not None and alert.figures["centroid_distance"] > 0.5
    assert alert.figures["mmd2"] is not None and alert.figures["mmd2"] > 0.2
    assert alert.value == alert.figures["mmd2"] and alert.value > alert.threshold
    assert alert.count == PER_WINDOW and alert.figures["reference_count"] == 100
    assert alert.examples and all(e.startswith(f"w{SHIFT_AT}-") for e in alert.examples)
    # the last window compared, on /metrics (a code window against the code reference learnt again)
    assert telemetry.EMBEDDING_DRIFT.labels("qa", "count")._value.get() == PER_WINDOW
    assert 0.0 <= telemetry.EMBEDDING_DRIFT.labels("qa", "centroid_distance")._value.get() < 0.2
    print(alert.message)


async def test_with_notify_a_drift_alert_resolves_once_the_new_reference_is_in_control(
    aredis: aioredis.Redis, prefix: str
) -> None:
    need_extra()
    alerts = await _run(aredis, prefix, _outcomes(SHIFT_AT), 2, resolves=True)
    assert [(a.status, a.resolution) for a in alerts] == [("firing", None), ("resolved", "in_control")]
    fired, resolved = alerts
    assert resolved.id == fired.id
    # the reference learnt again from the 5 windows after the alarm (100 events), then a window compared
    assert resolved.window.start == format_time(T0 + (SHIFT_AT + 6) * SIZE)
    assert resolved.figures["mmd2"] is not None and resolved.figures["mmd2"] < 0.05
    assert resolved.message.startswith("resolved: outputs of m / qa no longer drift")


async def test_a_stable_stream_raises_nothing(aredis: aioredis.Redis, prefix: str) -> None:
    need_extra()
    assert await _run(aredis, prefix, _outcomes(WINDOWS), 2) == []


async def test_sums_do_not_depend_on_the_split(aredis: aioredis.Redis, prefix: str) -> None:
    """The window's drift hash byte for byte, whatever the split among workers and batches."""
    need_extra()
    windows = _outcomes(SHIFT_AT)[:6]
    seen = []
    for workers, seed in ((1, 1), (2, 2), (3, 3), (4, 4)):
        p = f"{prefix}{workers}:"
        await _run(aredis, p, windows, workers, seed=seed)
        store = ResultStore(aredis, prefix=p)
        key = store.keys.embedding_window(store.pair_id("m", "qa", _version()), SIZE, T0 + 2 * SIZE)
        seen.append(await aredis.hgetall(key))
    assert seen[0] and all(s == seen[0] for s in seen[1:])
    assert len(seen[0]) == 1 + 16  # the sums and the reservoir (bottom 16 of 20 events)


async def test_bytes_per_pair_and_window_are_bounded(aredis: aioredis.Redis, prefix: str) -> None:
    need_extra()
    windows = _outcomes(SHIFT_AT)
    _, suites = parse_config_text(_config())
    cfg = suites.windowing.embedding_drift
    assert cfg is not None
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=LATENESS,
        clock=lambda: T0 + 1,
        recorders=[DriftRecorder(cfg)],
    )
    key = store.keys.embedding_window(store.pair_id("m", "qa", _version()), SIZE, T0)
    sizes = []
    for w in range(4):  # 20, 40, 60, 80 events in one window (their times moved into it)
        items = []
        for o in windows[w]:
            assert o.result is not None
            r = o.result.model_copy(update={"event_time": format_time(T0 + 1)})
            items.append((r, r.model_dump_json().encode(), o.counters, b"", o.annotations))
        await store.record_many(items)
        sizes.append(int(await aredis.memory_usage(key, samples=0)))
    # 642 doubles (5,136 bytes) + 16 reservoir entries (~400 bytes each: hash, id, scale, 384 int8) + the
    # hash table's overhead (~100 bytes an entry); full from the first batch (20 events > 16), then flat up to
    # the hash's bucket array (Redis rehashes it incrementally, in the background too: MEMORY USAGE counts a
    # second 32 x 8-byte array while a rehash is under way, so whether a batch sees it depends on timing)
    assert max(sizes) < 16_000 and max(sizes[1:]) - min(sizes[1:]) <= 32 * 8, sizes
    print("drift hash bytes per pair x window:", sizes)


def test_config_errors_name_the_field(aredis: aioredis.Redis) -> None:
    need_extra()
    store = ResultStore(aredis, windows=(60,))
    _, suites = parse_config_text(_config())
    with pytest.raises(ConfigError, match=r"windowing\.embedding_drift\.window"):
        window_steps(suites, store.windows)
    with pytest.raises(ConfigError, match=r"windowing\.embedding_drift.*no_such_model_package.*pip install"):
        parse_config_text(_config(model="no_such_model_package"))
    with pytest.raises(ConfigError, match=r"windowing\.embedding_drift\.features"):
        parse_config_text(_config(features=2))


async def test_a_late_event_follows_its_figures_into_the_open_window(
    aredis: aioredis.Redis, prefix: str
) -> None:
    """An event of an already closed window is counted in the window open now (late_redirected): its
    drift numbers go there too, never into the published window."""
    need_extra()
    windows = _outcomes(SHIFT_AT)
    _, suites = parse_config_text(_config())
    cfg = suites.windowing.embedding_drift
    assert cfg is not None
    clock = Clock(float(T0))
    store = ResultStore(
        aredis,
        prefix=prefix,
        windows=(SIZE,),
        allowed_lateness_s=LATENESS,
        clock=clock,
        recorders=[DriftRecorder(cfg)],
    )
    pair = store.pair_id("m", "qa", _version())

    def items(outcomes: list[Outcome]) -> list[Any]:
        return [
            (o.result, o.result.model_dump_json().encode(), o.counters, b"", o.annotations)
            for o in outcomes
            if o.result
        ]

    clock.now = T0 + 1
    await store.record_many(items(windows[0][:10]))
    clock.now = T0 + 3 * SIZE + 1  # window 0 is past the watermark: its late events are redirected
    before = await aredis.hgetall(store.keys.embedding_window(pair, SIZE, T0))
    await store.record_many(items(windows[0][10:12]))
    assert await aredis.hgetall(store.keys.embedding_window(pair, SIZE, T0)) == before
    open_now = await aredis.hget(store.keys.embedding_window(pair, SIZE, T0 + 3 * SIZE), "s")
    assert open_now is not None
    from streameval.features.embedding_drift import unpack_sums

    assert unpack_sums(open_now)[0] == 2
    figures = (await store.window(SIZE, T0 + 3 * SIZE, "m", "qa", _version())).fields
    assert figures["late_redirected"] == 2
