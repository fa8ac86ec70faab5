"""kill -9 the worker at 5 random points while 20,400 events flow, restarting it each time (docs/reliability.md).

Afterwards every valid id has a result on the results topic (all copies byte-identical), every
invalid event a dead letter, and the Redis aggregates count each event exactly once. Duplicate
copies (events redelivered after a kill: processed, not yet committed, their published marks not yet
written) are allowed, reported and bounded: at most what the worker had in flight per kill.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, account, make_stream, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

VALID, INVALID, KILLS = 20_000, 400, 5
IN_FLIGHT = 4 * 256  # the default STREAMEVAL_BATCHES_IN_FLIGHT x STREAMEVAL_BATCH_MAX


async def test_kill_9_five_times_loses_nothing_and_counts_once(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    events, ids, bad = make_stream(VALID, INVALID, seed=seed, run=f"k{uuid.uuid4().hex[:6]}")
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    config = write_config(tmp_path)
    app_id = f"kill-{uuid.uuid4().hex[:8]}"
    env = {"STREAMEVAL_BROKER_SESSION_TIMEOUT": "6"}
    # the kill points: numbers of distinct results seen, spread over the run
    points = sorted(rng.sample(range(VALID // 20, VALID * 9 // 10), KILLS))
    recover: list[float] = []
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        producing = asyncio.create_task(produce(broker.bootstrap, topics["requests"], events))
        worker = start_worker(config, app_id=app_id, **env)
        for point in points:
            await reader.wait(point, timeout=180, what=f"kill point {point}")
            os.kill(worker.proc.pid, signal.SIGKILL)
            worker.proc.wait()
            assert worker.proc.returncode == -signal.SIGKILL
            killed_at = time.time()
            worker = start_worker(config, app_id=app_id, **env)
            # time to recover: from the kill until the new worker's first fresh evaluation arrives
            recover.append(await reader.evaluated_after(killed_at, timeout=120))
        assert await producing == len(events)
        await reader.wait(VALID, timeout=300, what="every valid event")
        records = await reader.quiesce()
    assert worker.stop() == 0
    figures = await account(records, topics, ids, bad, aredis, prefix)
    sys.stderr.write(
        f"\nkill -9 x{KILLS} (seed {seed}, points {points}): {len(events)} events, {figures}, "
        f"recovery s {[round(s, 1) for s in recover]}\n"
    )
    assert not figures.problems, (seed, figures.problems)
    # published marks: a redelivered event whose batch the broker acknowledged publishes nothing, so what
    # a kill leaves is at most the events in flight (STREAMEVAL_BATCHES_IN_FLIGHT x STREAMEVAL_BATCH_MAX,
    # the defaults 4 x 256) and the last acknowledged batches' marks not yet written: bounded per kill
    assert figures.duplicate_results <= KILLS * IN_FLIGHT, (seed, figures.duplicate_results)
