"""Synchronous evaluation on the worker's loop goes in slices when events are dear: the loop turns between
slices (heartbeats, the closers' timers), and the outcomes are those of the whole batch at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import orjson

from streameval import batch as batch_module
from streameval.batch import SLICE_S, evaluate_batch
from streameval.config import parse_config_text
from streameval.envelope import Outcome
from streameval.pipeline import Pipeline, Source

CONFIG = """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}, {evaluator: similarity}]
"""


class Paced(Pipeline):
    """A real pipeline whose synchronous evaluation costs ``delay`` seconds an event (a dear evaluator)."""

    def __init__(self, delay: float) -> None:
        _, suites = parse_config_text(CONFIG)
        super().__init__(suites)
        self.delay = delay
        self.slices: list[int] = []
        self.clock = lambda: 1_800_000_000.0  # type: ignore[method-assign]  # one received_at for both runs

    def process_sync_batch(
        self, batch: Sequence[tuple[bytes, Source]], received_at: float
    ) -> list[Outcome | None]:
        self.slices.append(len(batch))
        time.sleep(self.delay * len(batch))
        return super().process_sync_batch(batch, received_at)


def events(n: int) -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps({"id": f"e{i}", "model": "m", "output": f"answer {i}", "expected": "answer 3"}),
            Source("t", 0, i),
        )
        for i in range(n)
    ]


async def test_dear_events_go_in_slices_and_the_loop_turns_between_them() -> None:
    pipeline = Paced(delay=SLICE_S / 2.5)  # two events a slice, at most
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        before = turns
        sliced = await evaluate_batch(pipeline, events(10))
        during = turns - before
    finally:
        ticking.cancel()
    assert pipeline.slices[0] == 1  # the cost is measured on the first event
    assert sum(pipeline.slices) == 10 and max(pipeline.slices[1:]) <= 2, pipeline.slices
    assert during >= len(pipeline.slices) - 1  # the loop turned between every two slices
    whole = Paced(delay=0).process_sync_batch(events(10), 1_800_000_000.0)
    assert [o.result for o in sliced] == [o.result for o in whole if o is not None]


async def test_cheap_events_go_in_one_call_once_their_cost_is_known() -> None:
    pipeline = Paced(delay=0)
    await evaluate_batch(pipeline, events(50))
    assert pipeline.slices[0] == 1  # the first batch: the cost is not known yet
    pipeline.slices.clear()
    await evaluate_batch(pipeline, events(256))
    assert pipeline.slices == [256]
    assert batch_module._COST[pipeline] * 256 <= SLICE_S
