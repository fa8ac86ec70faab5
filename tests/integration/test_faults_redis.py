"""Redis unavailable for 10 s, then restarted (docs/reliability.md), on a private embedded Redis.

The worker's Redis is a valkey-server of its own (never the shared one at 127.0.0.1:6379) with an
append-only file fsynced on every write, so a restart keeps what was acknowledged. Mid-stream the
server is killed (SIGKILL), left down for 10 s and started again on the same port and directory.
While it is down the worker must stay alive, publish nothing new (nothing unrecorded goes out and
offsets are not committed past it) and retry with backoff; afterwards the accounting is exact.
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

from streameval.embedded import EmbeddedBroker, EmbeddedRedis
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, account, make_stream, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

VALID, INVALID, OUTAGE_S = 6_000, 120, 10.0


class DurableRedis(EmbeddedRedis):
    """An embedded valkey-server whose data survives a restart (AOF, fsync on every write)."""

    name = "redis-durable"

    def argv(self) -> list[str]:
        argv = super().argv()
        at = argv.index("--appendonly")
        argv[at + 1] = "yes"
        return [*argv, "--appendfsync", "always"]


@pytest.fixture
def durable_redis() -> Iterator[DurableRedis]:
    server = DurableRedis().start()
    yield server
    server.stop()


async def test_redis_outage_and_restart_stall_then_resume_exactly(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    durable_redis: DurableRedis,
    tmp_path: Path,
) -> None:
    events, ids, bad = make_stream(VALID, INVALID, seed=3, run=f"r{uuid.uuid4().hex[:6]}")
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    worker = start_worker(write_config(tmp_path), REDIS_URL=durable_redis.url)
    client = aioredis.Redis.from_url(durable_redis.url)
    try:
        async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
            producing = asyncio.create_task(produce(broker.bootstrap, topics["requests"], events))
            await reader.wait(VALID // 5, timeout=120, what="a fifth of the results")
            assert durable_redis.proc is not None
            os.kill(durable_redis.proc.pid, signal.SIGKILL)
            durable_redis.proc.wait()
            down_at = time.time()
            # results recorded just before the kill may still be in flight to the topic; then nothing
            await asyncio.sleep(2.0)
            during = len(reader.records)
            await asyncio.sleep(OUTAGE_S - 2.0)  # the outage itself: 10 s with Redis down
            assert len(reader.records) == during, "the worker published while Redis was down"
            assert worker.proc.poll() is None, "the worker died during the Redis outage"
            durable_redis.start()
            up_at = time.time()
            recovery = await reader.evaluated_after(up_at, timeout=60)
            assert await producing == len(events)
            await reader.wait(VALID, timeout=180, what="every valid event")
            records = await reader.quiesce()
        assert worker.stop() == 0
        figures = await account(records, topics, ids, bad, client, prefix)
    finally:
        await client.aclose()
    log = worker.log()
    retries = log.count("failed (")
    sys.stderr.write(
        f"\nRedis down {up_at - down_at:.1f} s: {len(events)} events, {figures}, "
        f"first fresh result {recovery:.1f} s after restart, {retries} retry warnings\n"
    )
    assert "retrying in" in log, "no backoff retry was logged"
    assert not figures.problems, figures.problems
