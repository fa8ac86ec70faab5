"""A backlog never changes a score: a worker started behind 600 events with a slow code evaluator
(real broker, real Redis, worker subprocess) gives every event the score it gets when sent alone.

Before, the wait for a sandbox slot counted against the code's ``timeout_ms``: with 256 events of a
batch in flight and one slot per core, the later ones failed ``timeout: no Python sandbox zygote
became free within 2000 ms`` and scored 0.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce
from streameval.models import GradedResult
from streameval.sandbox import probe

from .faults_support import LiveReader, write_config

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(probe().missing), reason=f"sandbox mechanisms missing: {probe().missing}"),
]

EVENTS = 600
CONFIG = """
suites:
  - name: slow
    default: true
    evaluators:
      - evaluator: code
        name: slow
        params:
          language: python
          timeout_ms: 2000
          code: |
            import asyncio
            async def evaluate(input, output, expected, metadata):
                await asyncio.sleep(0.05)
                return {'passed': True, 'score': (len(output) % 10) / 10}
"""


async def test_a_backlog_scores_like_events_sent_slowly(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    events = [orjson.dumps({"id": f"b{run}-{i}", "model": "m", "output": "x" * i}) for i in range(EVENTS)]
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    config = write_config(tmp_path, CONFIG)
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        await produce(broker.bootstrap, topics["requests"], events)  # the backlog is there before the worker
        start = time.monotonic()
        worker = start_worker(config)
        await reader.wait(EVENTS, timeout=300, what="every event of the backlog")
        took = time.monotonic() - start
        records = await reader.quiesce(idle=1.0)
    assert worker.stop() == 0
    results = {
        r.id: r
        for r in (GradedResult.model_validate_json(x.value) for x in records if x.topic == topics["results"])
    }
    sys.stderr.write(f"\nbacklog of {EVENTS} events with a 50 ms code evaluator: {took:.1f} s\n")
    assert not reader.dead and len(results) == EVENTS
    errors = [r.evaluators[0].reason for r in results.values() if r.evaluators[0].error]
    assert errors == []
    # the score each event gets alone (the evaluator is a pure function of the output)
    assert all(results[f"b{run}-{i}"].score == (i % 10) / 10 for i in range(EVENTS))
