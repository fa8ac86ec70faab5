"""Dead letters always fit the broker, on the real broker, Redis and a worker process.

The worker's producer limit (``STREAMEVAL_MAX_MESSAGE_BYTES``, aiokafka's ``max_request_size``) is
lowered to 200 kB, standing for a broker's ``message.max.bytes`` (Tansu has no such setting). Events
larger than that limit (one also larger than ``STREAMEVAL_MAX_EVENT_BYTES``, one invalid JSON) must each give a
dead letter under ``STREAMEVAL_DEAD_LETTER_MAX_BYTES`` whose whole event is in Redis, and the worker
must go on evaluating the events after them (before, one such event stopped the worker for good).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer

from streameval.cli import main as cli_main
from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import collect, ensure_topics
from streameval.models import DeadLetter

from .faults_support import write_config

pytestmark = pytest.mark.integration

LIMIT, DEAD_LETTER_MAX = 200_000, 65_536


async def send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 << 20)
    await producer.start()
    try:
        for value in values:
            await (await producer.send(topic, value))
    finally:
        await producer.stop()


async def test_oversized_dead_letters_fit_and_the_worker_goes_on(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    huge = [
        b'{"model":"m","output":"' + b"A" * 300_000 + b'"}',  # no id: schema; base64 400 kB > the limit
        b'{"model":"m","output":"' + b"B" * 800_000 + b'"}',  # the shape that stopped a worker for good
        b'{"id":"big","model":"m","output":"' + b"C" * 1_200_000 + b'"}',  # over max_event_bytes: too_large
        b'{"model":"m","output":"' + b"D" * 800_000,  # 800 kB of invalid JSON (the string never closes)
    ]
    valid = [
        orjson.dumps({"id": f"after-{i}", "model": "m", "output": "Paris", "expected": "Paris"})
        for i in range(20)
    ]
    worker = start_worker(
        write_config(tmp_path),
        STREAMEVAL_MAX_MESSAGE_BYTES=str(LIMIT),
        STREAMEVAL_DEAD_LETTER_MAX_BYTES=str(DEAD_LETTER_MAX),
    )
    await send(broker.bootstrap, topics["requests"], huge + valid)
    records = await collect(
        broker.bootstrap,
        [topics["results"], topics["deadletter"]],
        until=lambda rs: (
            sum(r.topic == topics["results"] for r in rs) >= len(valid)
            and sum(r.topic == topics["deadletter"] for r in rs) >= len(huge)
        ),
        timeout=90,
    )
    assert worker.proc.poll() is None, "the worker exited"
    letters = [DeadLetter.model_validate_json(r.value) for r in records if r.topic == topics["deadletter"]]
    assert sorted(d.kind for d in letters) == ["invalid_json", "schema", "schema", "too_large"]
    # each event has its letter; matched by hash, as a send retried under load may land after a later one
    by_hash = {hashlib.sha256(raw).hexdigest(): raw for raw in huge}
    for record, letter in zip([r for r in records if r.topic == topics["deadletter"]], letters, strict=True):
        assert len(record.value) <= DEAD_LETTER_MAX
        assert letter.truncated is not None and letter.truncated.stored_key is not None
        raw = by_hash.pop(letter.truncated.sha256)
        assert letter.truncated.length == len(raw)
        assert raw.startswith(base64.b64decode(letter.raw)) and raw.endswith(
            base64.b64decode(letter.truncated.tail)
        )
        assert await aredis.get(letter.truncated.stored_key) == raw
    assert by_hash == {}, "an event has no dead letter"
    # the operator's way to fetch one: by key or by hash
    monkeypatch.setenv("STREAMEVAL_REDIS_PREFIX", prefix)
    out = tmp_path / "whole.json"
    first = letters[0].truncated
    assert first is not None and first.stored_key is not None
    code = await asyncio.to_thread(
        cli_main, ["dead-letter-raw", first.sha256, "--output", str(out), "--redis-url", redis_url]
    )
    assert (
        code == 0
        and hashlib.sha256(out.read_bytes()).hexdigest() == first.sha256
        and out.read_bytes() in huge
    )
    assert {r.key for r in records if r.topic == topics["results"]} == {
        f"after-{i}".encode() for i in range(20)
    }
    assert worker.stop() == 0
