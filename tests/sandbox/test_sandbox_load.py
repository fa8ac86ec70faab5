"""No score depends on load: waiting for a sandbox slot never counts against the code's timeout."""

from __future__ import annotations

import asyncio

import pytest
from _support import raw_event

from streameval.config import parse_config
from streameval.pipeline import Pipeline
from streameval.sandbox import probe
from streameval.sandbox._pool import default_slots

pytestmark = pytest.mark.skipif(
    bool(probe().missing), reason=f"sandbox mechanisms missing: {probe().missing}"
)

# 200 ms of work per call (a sleep, so the box's other load cannot push it past its own 2 s limit)
WORK_S = 0.2
SLOW = (
    "import asyncio\n"
    "async def evaluate(input, output, expected, metadata):\n"
    f"    await asyncio.sleep({WORK_S})\n"
    "    return {'passed': True, 'score': (len(output) % 10) / 10}\n"
)
TIMEOUT_MS = 2000


def _events(n: int) -> list[bytes]:
    return [raw_event(id=f"e{i}", output="x" * i) for i in range(n)]


async def test_a_backlog_gives_the_same_scores_as_events_sent_slowly() -> None:
    # enough events that the last waits far longer than timeout + grace for a slot:
    # n x 200 ms / slots >= 3 x (2 s + 1 s)
    n = max(60, int(3 * (TIMEOUT_MS / 1000 + 1.0) / WORK_S * default_slots()))
    evaluator = {
        "evaluator": "code",
        "name": "slow",
        "params": {"language": "python", "code": SLOW, "timeout_ms": TIMEOUT_MS},
    }
    _, suites = parse_config({"suites": [{"name": "s", "default": True, "evaluators": [evaluator]}]})
    pipeline = Pipeline(suites)
    await pipeline.start()
    try:
        raws = _events(n)
        slowly = [await pipeline.process(raw) for raw in raws[:5]]  # one at a time: no wait for a slot
        backlog = await asyncio.gather(*(pipeline.process(raw) for raw in raws))  # all at once
    finally:
        await pipeline.close()
    errors = [o.result.evaluators[0].reason for o in backlog if o.result and o.result.evaluators[0].error]
    assert errors == []
    assert [o.result.score for o in backlog if o.result] == [(i % 10) / 10 for i in range(n)]
    assert [o.result.score for o in slowly if o.result] == [o.result.score for o in backlog[:5] if o.result]
