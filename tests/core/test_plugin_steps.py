"""The annotator and processor-step protocols (streameval.feature): what the pipeline notes of each event, and
what the processor tells its steps after each record call. Real Redis for the processor."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.feature import RecordedBatch
from streameval.pipeline import Pipeline, Source
from streameval.processor import Processor, Publish
from streameval.store import ResultStore

_, SUITES = parse_config(
    {"suites": [{"name": "rules", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
)


class Lengths:
    """Notes each output's length, none for an empty output; a step's name."""

    key = "length"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def annotate(self, evaluated: Any) -> list[int | None]:
        self.calls.append(len(evaluated))
        return [len(event.output) or None for event, _, _ in evaluated]

    def step(self, document: dict[str, Any], now: float) -> str:
        return str(document.get("name"))


def _raw(i: int, output: str) -> bytes:
    return orjson.dumps({"id": f"e{i}", "model": "m", "output": output, "expected": "Paris"})


def test_without_annotators_every_outcome_has_no_annotations() -> None:
    pipeline = Pipeline(SUITES)
    found = pipeline.process_sync_batch([(_raw(i, "Paris"), Source()) for i in range(3)], 0.0)
    assert [o.annotations if o else None for o in found] == [{}, {}, {}]
    assert pipeline.step(b'{"name": "tool"}', Source()).annotations == {}


@pytest.mark.parametrize("outputs", [["Paris", "", "Rome"], ["", ""], ["x"]])
def test_a_batch_is_annotated_once_as_each_event_alone_would_be(outputs: list[str]) -> None:
    lengths = Lengths()
    pipeline = Pipeline(SUITES, annotators=[lengths])
    batch = [(_raw(i, out), Source()) for i, out in enumerate(outputs)]
    together = pipeline.process_sync_batch(batch, 0.0)
    assert lengths.calls == [len(outputs)]  # one call a batch
    alone = [pipeline.process_sync(raw, source, 0.0) for raw, source in batch]
    expected = [{"length": len(out)} if out else {} for out in outputs]
    assert [o.annotations if o else None for o in together] == expected
    assert [o.annotations if o else None for o in alone] == expected
    assert pipeline.step(b'{"name": "tool"}', Source()).annotations == {"length": "tool"}


class Steps:
    """A processor step that keeps what it is told and publishes one message per fresh result."""

    def __init__(self, name: str, seen: list[tuple[str, RecordedBatch]]) -> None:
        self.name, self.seen = name, seen

    async def recorded(self, batch: RecordedBatch) -> list[Publish]:
        self.seen.append((self.name, batch))
        return [Publish("review", self.name.encode(), str(i).encode()) for i in sorted(batch.fresh)]


async def test_the_steps_are_told_each_record_call_in_order_and_publish_after_the_batch(
    aredis: aioredis.Redis, prefix: str
) -> None:
    seen: list[tuple[str, RecordedBatch]] = []
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    processor = Processor(Pipeline(SUITES), store, steps=[Steps("a", seen), Steps("b", seen)])
    run = uuid.uuid4().hex[:8]
    batch = [
        (orjson.dumps({"id": f"{run}-{n}", "model": "m", "output": "Paris"}), Source("in", 0, n))
        for n in range(3)
    ] + [(b"not json", Source("in", 0, 3))]
    await processor.start()
    try:
        first = await processor.process_batch(batch)
        again = await processor.process_batch(batch[:2])  # a redelivery: nothing fresh
    finally:
        await processor.close()
    assert [m.kind for m in first] == ["result"] * 3 + ["deadletter"] + ["review"] * 6
    assert [(m.key, m.value) for m in first[4:]] == [
        (n, str(i).encode()) for n in (b"a", b"b") for i in range(3)
    ]
    assert [m.kind for m in again] == ["result", "result"]
    assert [name for name, _ in seen] == ["a", "b", "a", "b"]
    told = seen[0][1]
    assert (list(told.results), set(told.fresh), list(told.steps)) == ([0, 1, 2], {0, 1, 2}, [])
    assert told.content(1) == batch[1][0] and told.outcomes[3].dead_letter is not None
    assert (list(seen[2][1].results), set(seen[2][1].fresh)) == ([0, 1], set())
