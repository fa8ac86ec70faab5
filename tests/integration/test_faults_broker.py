"""Broker restart mid-stream on durable storage (docs/reliability.md): Tansu on S3 storage (local SeaweedFS).

A third of the way through 4,080 events the broker is killed (SIGKILL), left down for 5 s and started
again on the same port and bucket. The worker, the producer and the reader reconnect by themselves; afterwards
nothing is lost and the aggregates count each event once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from streameval.kafka_io import ensure_topics, produce

from .durable_broker import S3Broker, SeaweedS3
from .faults_support import LiveReader, account, make_stream, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

VALID, INVALID, DOWN_S = 4_000, 80, 5.0


@pytest.fixture
def s3_broker() -> Iterator[S3Broker]:
    with SeaweedS3() as store, S3Broker(store) as broker:
        yield broker


async def test_broker_restart_on_s3_storage_loses_nothing(
    s3_broker: S3Broker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    bootstrap = s3_broker.bootstrap
    events, ids, bad = make_stream(VALID, INVALID, seed=9, run=f"s{uuid.uuid4().hex[:6]}")
    await ensure_topics(bootstrap, topics.values(), partitions=2)
    await produce(bootstrap, topics["requests"], events)
    worker = start_worker(write_config(tmp_path), KAFKA_BOOTSTRAP_SERVERS=bootstrap)
    async with LiveReader(bootstrap, topics["results"], topics["deadletter"]) as reader:
        await reader.wait(VALID // 3, timeout=180, what="a third of the results")
        assert s3_broker.proc is not None
        os.kill(s3_broker.proc.pid, signal.SIGKILL)
        s3_broker.proc.wait()
        down_at = time.time()
        await asyncio.sleep(DOWN_S)  # the outage itself
        s3_broker.start()
        up_at = time.time()
        recovery = await reader.evaluated_after(up_at, timeout=120)
        await reader.wait(VALID, timeout=300, what="every valid event")
        records = await reader.quiesce()
    assert worker.proc.poll() is None, "the worker died with the broker"
    assert worker.stop() == 0
    figures = await account(records, topics, ids, bad, aredis, prefix)
    sys.stderr.write(
        f"\nbroker kill -9 + restart on S3 storage (down {up_at - down_at:.1f} s): {len(events)} events, "
        f"{figures}, first fresh result {recovery:.1f} s after the restart\n"
    )
    assert not figures.problems, figures.problems
