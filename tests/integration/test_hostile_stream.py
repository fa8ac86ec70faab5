"""A real worker (Tansu broker, Redis) takes a batch of hostile events, then good ones: every event ends
in a result or a dead letter with its raw bytes, and the worker is still consuming afterwards.

Events are capped at 256 KiB here so every dead letter (base64, 4/3 of the raw bytes) fits the
producer's 1 MiB request limit; dead letters of events near 1 MiB are another concern (they must be
sized to fit the broker) and are not part of this test.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import collect, ensure_topics, produce

from .faults_support import write_config

pytestmark = pytest.mark.integration

MAX_EVENT_BYTES = 256 * 1024
SIZE = 200_000  # each storm's size, under the limit


def _fill(unit: bytes, head: bytes = b"", tail: bytes = b"") -> bytes:
    """About SIZE bytes: ``unit`` repeated a whole number of times between ``head`` and ``tail``."""
    return head + unit * ((SIZE - len(head) - len(tail)) // len(unit)) + tail


META = b'{"id":"h-%d","model":"m","output":"x","metadata":{"k":'
HOSTILE: list[bytes] = [
    b'{"id":"h-1","model":"m","output":"\xff\xfe"}',  # bad UTF-8
    META % 2 + b"NaN}}",
    META % 3 + b"1e999}}",
    META % 4 + b"[" * 5000 + b"]" * 5000 + b"}}",
    b'{"id":"h-5","id":"h-5b","model":"m","output":"x"}',  # duplicate keys
    orjson.dumps({"id": "h-6", "model": "M" * 10_000, "output": "x"}),
    _fill(b'"\\', b"{" * 65),  # the input that made the depth regex quadratic (~3 min of CPU at 200 KB)
    _fill(b"a", b'{"id":"h-8","model":"m","output":"'),  # unclosed string
    _fill(b"["),  # bracket storm
    _fill(b"[],", META % 10 + b"[", b"[]]}}"),  # valid: 66k empty arrays -> a result
    orjson.dumps({"model": "m", "output": "A" * SIZE}),  # no id, 200 KB
    orjson.dumps({"id": "h-12", "model": "m", "output": "x" * (MAX_EVENT_BYTES + 10)}),  # too large
    _fill(b"1,", b'{"id":"h-13","model":"m","output":"x","references":[', b"1]}"),
]


def _good(start: int, count: int) -> list[bytes]:
    return [
        orjson.dumps({"id": f"good-{i}", "model": "m", "output": "Paris", "expected": "Paris"})
        for i in range(start, start + count)
    ]


async def test_worker_survives_a_hostile_batch_and_keeps_consuming(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> None:
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    first_good = _good(0, 20)
    await produce(broker.bootstrap, topics["requests"], [*HOSTILE, *first_good])
    worker = start_worker(write_config(tmp_path), STREAMEVAL_MAX_EVENT_BYTES=str(MAX_EVENT_BYTES))
    out_topics = [topics["results"], topics["deadletter"]]
    expected = len(HOSTILE) + len(first_good)
    records = await collect(broker.bootstrap, out_topics, until=lambda r: len(r) >= expected, timeout=150)

    results = [orjson.loads(r.value) for r in records if r.topic == topics["results"]]
    letters = [orjson.loads(r.value) for r in records if r.topic == topics["deadletter"]]
    assert {r["id"] for r in results} == {f"good-{i}" for i in range(20)} | {"h-10"}
    # a dead letter over STREAMEVAL_DEAD_LETTER_MAX_BYTES carries the event's head and its sha256, not all of it
    digests = [
        d["truncated"]["sha256"]
        if d.get("truncated")
        else hashlib.sha256(base64.b64decode(d["raw"])).hexdigest()
        for d in letters
    ]
    assert sorted(digests) == sorted(
        hashlib.sha256(raw).hexdigest() for raw in HOSTILE if not raw.startswith(META % 10)
    ), "a hostile event was lost"
    for d in letters:
        if d.get("truncated"):
            assert any(raw.startswith(base64.b64decode(d["raw"])) for raw in HOSTILE)
    assert all(d["kind"] in {"invalid_json", "schema", "too_large"} and d["reason"] for d in letters)

    # still consuming: events sent after the hostile batch are evaluated too
    await produce(broker.bootstrap, topics["requests"], _good(20, 5))
    records = await collect(broker.bootstrap, out_topics, until=lambda r: len(r) >= expected + 5, timeout=60)
    later = {orjson.loads(r.value)["id"] for r in records if r.topic == topics["results"]}
    assert {f"good-{i}" for i in range(20, 25)} <= later
    assert worker.stop() == 0
