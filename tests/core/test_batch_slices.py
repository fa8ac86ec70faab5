"""Synchronous evaluation on the worker's loop goes in slices when events are dear: the loop turns between
slices (heartbeats, the closers' timers), and the outcomes are those of the whole batch at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson
import pytest

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


class Clock:
    """The slices' clock: it moves only when the pipeline says an event cost something (no wall time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Paced(Pipeline):
    """A real pipeline whose synchronous evaluation costs ``delay`` seconds an event on ``clock``."""

    def __init__(self, delay: float, clock: Clock) -> None:
        _, suites = parse_config_text(CONFIG)
        super().__init__(suites)
        self.delay = delay
        self.slices: list[int] = []
        self.paced = clock
        self.clock = lambda: 1_800_000_000.0  # type: ignore[method-assign]  # one received_at for both runs

    def process_sync_batch(
        self, batch: Sequence[tuple[bytes, Source]], received_at: float
    ) -> list[Outcome | None]:
        self.slices.append(len(batch))
        self.paced.now += self.delay * len(batch)
        return super().process_sync_batch(batch, received_at)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(batch_module, "_clock", clock)
    return clock


def events(n: int) -> list[tuple[bytes, Source]]:
    return [
        (
            orjson.dumps({"id": f"e{i}", "model": "m", "output": f"answer {i}", "expected": "answer 3"}),
            Source("t", 0, i),
        )
        for i in range(n)
    ]


async def test_dear_events_go_in_slices_and_the_loop_turns_between_them(clock: Clock) -> None:
    pipeline = Paced(SLICE_S / 2.5, clock)  # two events a slice
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
    # the cost is measured on the first event, then two events fit a slice
    assert pipeline.slices == [1, 2, 2, 2, 2, 1]
    assert during >= len(pipeline.slices) - 1  # the loop turned between every two slices
    whole = Paced(0, Clock()).process_sync_batch(events(10), 1_800_000_000.0)
    assert [o.result for o in sliced] == [o.result for o in whole if o is not None]


async def test_cheap_events_go_in_one_call_once_their_cost_is_known(clock: Clock) -> None:
    pipeline = Paced(SLICE_S / 1000, clock)
    await evaluate_batch(pipeline, events(50))
    assert pipeline.slices == [1, 49]  # the first batch: the cost is not known before its first event
    pipeline.slices.clear()
    await evaluate_batch(pipeline, events(256))
    assert pipeline.slices == [256]
    assert batch_module._COST[pipeline] == pytest.approx(SLICE_S / 1000)


async def test_a_dearer_stream_gets_smaller_slices(clock: Clock) -> None:
    pipeline = Paced(SLICE_S / 1000, clock)
    await evaluate_batch(pipeline, events(50))
    pipeline.slices.clear()
    pipeline.delay = SLICE_S / 10  # the events got dearer: the estimate follows
    await evaluate_batch(pipeline, events(256))
    assert pipeline.slices[0] == 256  # priced at the old cost
    pipeline.slices.clear()
    await evaluate_batch(pipeline, events(40))
    assert sum(pipeline.slices) == 40 and max(pipeline.slices) <= 20, pipeline.slices
