"""Score-shift alerts from two worker processes on the real broker (Tansu) and Redis: a drop in the
scores is alerted once per series, whichever worker closed which window, with its change point.

Windows are 2 s and the lateness 1 s; events are produced in real time over ~10 windows."""

from __future__ import annotations

import asyncio
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
from streameval.models import Alert, format_time, parse_time

from ._topics import read_all

pytestmark = pytest.mark.integration

SIZE, LATENESS, PER_WINDOW, WINDOWS, DROP_AT = 2, 1.0, 20, 10, 5
CONFIG = f"""
windowing:
  allowed_lateness_s: {LATENESS}
  close_interval_s: 0.2
  score_shift: {{window: {SIZE}, reference_events: 60, arl: 10000, shift: 0.2}}
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}]
"""


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


async def test_a_drop_is_alerted_once_per_series_by_two_workers(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    workers = [start_worker(config, app_id="shift", STREAMEVAL_WINDOWS=str(SIZE)) for _ in range(2)]
    now = await redis_now(aredis)
    warm = [
        raw_event(id=f"warm-{i}", model="warm", output="x", expected="x", timestamp=format_time(now))
        for i in range(4)
    ]
    await produce(broker.bootstrap, topics["requests"], warm, key=lambda v: orjson.loads(v)["id"].encode())
    await collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 4, timeout=60)

    start = (await redis_now(aredis) // SIZE + 1) * SIZE  # the next window boundary
    drop_start = start + DROP_AT * SIZE
    for w in range(WINDOWS):
        at = start + w * SIZE
        while await redis_now(aredis) < at:
            await asyncio.sleep(0.05)
        passing = 0.9 if w < DROP_AT else 0.3  # exact_match passes this share of the window's events
        batch = [
            raw_event(
                id=f"w{w}-{i}",
                model="m",
                output="Paris" if i < passing * PER_WINDOW else "Rome",
                expected="Paris",
                timestamp=format_time(at + 0.5),
            )
            for i in range(PER_WINDOW)
        ]
        await produce(
            broker.bootstrap, topics["requests"], batch, key=lambda v: orjson.loads(v)["id"].encode()
        )

    def both_series(records: list[Record]) -> bool:
        return (
            len(
                {
                    Alert.model_validate_json(r.value).change.series
                    for r in records  # type: ignore[union-attr]
                    if Alert.model_validate_json(r.value).metric == "score_shift"
                }
            )
            >= 2
        )

    await collect(broker.bootstrap, [topics["alerts"]], until=both_series, timeout=60)
    alerts = [
        Alert.model_validate_json(r.value) for r in await read_all(broker.bootstrap, [topics["alerts"]])
    ]
    for worker in workers:
        assert worker.proc.poll() is None, worker.log()[-3000:]
    shifts = [a for a in alerts if a.metric == "score_shift"]
    assert Counter(a.id for a in shifts).most_common(1)[0][1] == 1  # each alert once across the workers
    assert sorted(a.change.series for a in shifts if a.change) == ["evaluator:exact_match", "overall"]
    for alert in shifts:
        assert alert.change is not None and alert.model == "m" and alert.suite == "qa"
        assert alert.change.direction == "down" and alert.change.shift == pytest.approx(-0.6, abs=0.15)
        assert drop_start - 2 * SIZE <= parse_time(alert.change.start) <= parse_time(alert.window.start)
        assert alert.change.event_id is not None and alert.change.event_id.startswith("w")
        assert alert.examples
