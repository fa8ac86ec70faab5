"""A live version and a shadow on two worker processes (real broker and Redis), one killed with kill -9
mid-stream and started again: each version counts each event exactly once, the shadow's results are
marked, and only the live version has alerts (docs/versions.md)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event

from streameval.config import load_config
from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.keyspace import Keys
from streameval.models import GradedResult, format_time
from streameval.store import hash_fields

pytestmark = pytest.mark.integration

CONFIG = """
windowing: {allowed_lateness_s: 1, close_interval_s: 0.3}
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{evaluator: exact_match}]
    shadow:
      - label: softer
        threshold: 0.5
        evaluators: [{evaluator: similarity, params: {algorithm: levenshtein}}]
alerts:
  - {name: always, metric: mean_score, comparator: "<", threshold: 2, window: 2, severity: info}
"""
OUTPUTS = ["Paris", "Pariss", "London", "paris", "Lyon", "Parus"]
N = 600


async def test_live_and_shadow_on_two_workers_with_kill_9_count_each_event_once_per_version(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    prefix: str,
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(CONFIG)
    _, suites = load_config(config)
    live, shadow = suites.by_name["qa"].version, suites.by_name["qa"].shadows[0].suite.version
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    app_id = f"shadow-{uuid.uuid4().hex[:8]}"
    env = {"STREAMEVAL_WINDOWS": "2"}
    workers = [start_worker(config, app_id=app_id, **env) for _ in range(2)]
    run = uuid.uuid4().hex[:6]
    raws = [
        raw_event(
            id=f"{run}-{i}",
            model="m",
            output=OUTPUTS[i % len(OUTPUTS)],
            expected="Paris",
            timestamp=format_time(time.time()),
        )
        for i in range(N)
    ]

    async def send() -> None:  # in slices, so that the kill lands mid-stream
        for i in range(0, N, 50):
            await produce(
                broker.bootstrap,
                topics["requests"],
                raws[i : i + 50],
                key=lambda v: orjson.loads(v)["id"].encode(),
            )
            await asyncio.sleep(0.2)

    producing = asyncio.create_task(send())
    await collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 100, timeout=120)
    os.kill(workers[0].proc.pid, signal.SIGKILL)
    workers[0].proc.wait()
    workers.append(start_worker(config, app_id=app_id, **env))
    await producing
    ids = {orjson.loads(r)["id"] for r in raws}

    def done(records: list[Record]) -> bool:
        seen = {(GradedResult.model_validate_json(r.value).suite_version, r.key) for r in records}
        return len(seen) >= 2 * N

    records = await collect(broker.bootstrap, [topics["results"]], until=done, timeout=240)
    results = [GradedResult.model_validate_json(r.value) for r in records]
    assert {r.id for r in results if r.suite_version == live} == ids
    assert {r.id for r in results if r.suite_version == shadow} == ids
    assert all(r.shadow for r in results if r.suite_version == shadow)
    assert not any(r.shadow for r in results if r.suite_version == live)
    keys = Keys(prefix)
    for version in (live, shadow):
        for _ in range(100):
            figures = hash_fields(await aredis.hgetall(keys.all_time(Keys.pair_id("m", "qa", version))))
            if figures.get("count", 0) >= N:
                break
            await asyncio.sleep(0.1)
        assert figures["count"] == N, (version, figures)  # exactly once per version, despite the kill
    first = {r.id: r for r in results if r.suite_version == live}
    second = {r.id: r for r in results if r.suite_version == shadow}
    live_figures = hash_fields(await aredis.hgetall(keys.all_time(Keys.pair_id("m", "qa", live))))
    assert live_figures["passes"] == sum(r.passed for r in first.values())
    shadow_figures = hash_fields(await aredis.hgetall(keys.all_time(Keys.pair_id("m", "qa", shadow))))
    assert shadow_figures["passes"] == sum(r.passed for r in second.values())
    # alerts: the rule fires on every window, but only for the live version
    alerts = await collect(broker.bootstrap, [topics["alerts"]], until=lambda r: len(r) >= 1, timeout=60)
    assert alerts and all(orjson.loads(a.value)["suite_version"] == live for a in alerts)
    for worker in workers[1:]:
        assert worker.proc.poll() is None, worker.log()[-3000:]
