"""Windows and alerts with two worker processes on the real broker (Tansu) and Redis.

Both workers run the closing timer; each window × model × suite must be published once, each alert
once; an event late within the allowed lateness counts in its own window, an older one in the window
open when it arrived (``late_redirected``). Windows are 2 s and the lateness 4 s so the test takes seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.models import Aggregate, Alert, format_time, parse_time

from ._topics import read_all

pytestmark = pytest.mark.integration

SIZE, LATENESS = 2, 4.0
CONFIG = f"""
windowing: {{allowed_lateness_s: {LATENESS}, close_interval_s: 0.2}}
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}]
alerts:
  - {{name: every-window, metric: mean_score, comparator: "<", threshold: 2, window: {SIZE}, severity: info}}
  - {{name: never, metric: pass_rate, comparator: ">", threshold: 1, window: {SIZE}}}
"""


def event(event_id: str, at: float, model: str = "m1", output: str = "Paris") -> bytes:
    return raw_event(id=event_id, model=model, output=output, expected="Paris", timestamp=format_time(at))


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


async def test_two_workers_publish_each_window_and_alert_once_and_place_late_events(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    workers = [start_worker(config, app_id="windows", STREAMEVAL_WINDOWS=str(SIZE)) for _ in range(2)]
    results_topic = [topics["results"]]

    # warm up: both workers joined and consuming
    now = await redis_now(aredis)
    await produce(
        broker.bootstrap,
        topics["requests"],
        [event(f"warm-{i}", now, model="warm") for i in range(4)],
        key=lambda v: orjson.loads(v)["id"].encode(),
    )
    await collect(broker.bootstrap, results_topic, until=lambda r: len(r) >= 4, timeout=60)

    # the main batch: current events for two models, one event late within the lateness, one far too late
    now = await redis_now(aredis)
    current = [
        event(f"c-{i}", now, model=f"m{i % 2}", output="Paris" if i % 3 else "Rome") for i in range(40)
    ]
    ended = (
        now // SIZE
    ) * SIZE  # the previous window ended here, less than SIZE ago: late, >= 2 s within LATENESS
    late_ok = event("late-ok", ended - 0.5)
    ancient = event("ancient", now - 120, model="old")
    await produce(
        broker.bootstrap,
        topics["requests"],
        [*current, late_ok, ancient],
        key=lambda v: orjson.loads(v)["id"].encode(),
    )
    total = 4 + len(current) + 2

    def all_counted(records: list[Record]) -> bool:
        return sum(Aggregate.model_validate_json(r.value).count for r in records) >= total

    await collect(broker.bootstrap, [topics["aggregates"]], until=all_counted, timeout=60)
    records = await read_all(broker.bootstrap, [topics["aggregates"], topics["alerts"]])
    for worker in workers:
        assert worker.proc.poll() is None, worker.log()[-3000:]
    aggregates = [Aggregate.model_validate_json(r.value) for r in records if r.topic == topics["aggregates"]]
    alerts = [Alert.model_validate_json(r.value) for r in records if r.topic == topics["alerts"]]

    # each window × model × suite once, and every event in exactly one published window
    keys = Counter((a.window.start, a.model, a.suite) for a in aggregates)
    assert max(keys.values()) == 1, keys
    assert sum(a.count for a in aggregates) == total
    # each alert once: one per aggregate for the rule that always holds, none for the other
    assert Counter(a.id for a in alerts).most_common(1)[0][1] == 1
    assert {(a.window.start, a.model, a.suite) for a in alerts} == set(keys)
    assert {a.rule for a in alerts} == {"every-window"}

    # the late-within event counts in its own window, flagged late; the ancient one in a later window
    own = [a for a in aggregates if a.model == "m1" and parse_time(a.window.start) == ended - SIZE]
    assert len(own) == 1 and own[0].late >= 1
    # (the warm-up events may be redirected too: they waited for the workers to start)
    assert sum(a.late_redirected for a in aggregates if a.model != "warm") == 1
    [redirected] = [a for a in aggregates if a.model == "old"]
    assert redirected.late_redirected == 1 and parse_time(redirected.window.start) >= now - SIZE
