"""The pipeline: bad events become dead letters with a reason; bad evaluators never stop the stream."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any, ClassVar

import orjson
import pytest

from streameval.config import parse_config
from streameval.evaluators import Evaluator, Score, register, unregister
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline, Source


@register
class _Raises(Evaluator):
    name = "test_raises"

    def evaluate(self, event: RequestEvent) -> Score:
        raise ZeroDivisionError("boom")


@register
class _OutOfRange(Evaluator):
    name = "test_out_of_range"

    def evaluate(self, event: RequestEvent) -> Score:
        return Score(float(event.metadata.get("score", 1.5)), True)


@register
class _Slow(Evaluator):
    name = "test_async"
    is_async = True
    started: ClassVar[int] = 0

    async def aevaluate(self, event: RequestEvent) -> Score:
        await asyncio.sleep(0)
        return Score(0.5, True, "async", counters={"calls": 1})

    async def start(self) -> None:
        type(self).started += 1


@register
class _ReturnsNone(Evaluator):
    name = "test_returns_none"

    def evaluate(self, event: RequestEvent) -> Score:
        return None  # type: ignore[return-value]


@pytest.fixture(scope="module", autouse=True)
def _forget_test_evaluators() -> Iterator[None]:
    yield
    for name in ("test_raises", "test_out_of_range", "test_async", "test_returns_none"):
        unregister(name)


def pipeline(*evaluators: dict[str, Any], **kwargs: Any) -> Pipeline:
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "threshold": 0.5, "evaluators": list(evaluators)}]}
    )
    return Pipeline(suites, **kwargs)


def raw(**fields: Any) -> bytes:
    return orjson.dumps({"id": "e1", "model": "m", "output": "Paris", **fields})


@pytest.mark.parametrize(
    ("payload", "kind", "reason"),
    [
        (b"", "invalid_json", "not valid JSON"),
        (b"\xff\xfe\x00", "invalid_json", "not valid JSON"),
        (b'{"id": "e1", "model": "m", "output": "x"', "invalid_json", "EOF"),
        (b"[1, 2]", "schema", "is not of type 'object'"),
        (b'{"model": "m", "output": "x"}', "schema", "'id' is a required property"),
        (b'{"id": "", "model": "m", "output": "x"}', "schema", "$.id: '' should be non-empty"),
        (b'{"id": "e1", "model": "m", "output": null}', "schema", "$.output: None is not of type 'string'"),
        (b'{"id": "e1", "model": "m", "output": "x", "extra": 1}', "schema", "'extra' was unexpected"),
        (b'{"id": "e1", "model": "m", "output": "x", "timestamp": "noon"}', "schema", "$.timestamp"),
        (
            b'{"id": "e1", "model": "m", "output": "x", "suite": "nope"}',
            "unknown_suite",
            "unknown suite 'nope'",
        ),
    ],
)
async def test_bad_events_become_dead_letters(payload: bytes, kind: str, reason: str) -> None:
    outcome = await pipeline({"evaluator": "exact_match"}).process(payload, Source("t", 3, 42))
    assert outcome.result is None and outcome.dead_letter is not None
    dead = outcome.dead_letter
    assert dead.kind == kind
    assert reason in dead.reason
    assert base64.b64decode(dead.raw) == payload  # nothing lost: the raw bytes travel with it
    assert (dead.source.topic, dead.source.partition, dead.source.offset) == ("t", 3, 42)


async def test_schema_dead_letter_keeps_the_event_id() -> None:
    outcome = await pipeline({"evaluator": "exact_match"}).process(b'{"id": "abc", "model": "m"}')
    assert outcome.dead_letter is not None and outcome.dead_letter.event_id == "abc"


async def test_too_large_event_is_dead_lettered_before_parsing() -> None:
    big = raw(output="x" * 5000)
    outcome = await pipeline({"evaluator": "exact_match"}, max_event_bytes=4096).process(big)
    assert outcome.dead_letter is not None and outcome.dead_letter.kind == "too_large"
    assert base64.b64decode(outcome.dead_letter.raw) == big


async def test_a_failing_evaluator_gives_an_error_result_and_the_others_still_count() -> None:
    p = pipeline({"evaluator": "test_raises"}, {"evaluator": "exact_match", "weight": 3})
    outcome = await p.process(raw(expected="Paris"))
    assert outcome.result is not None
    failed, exact = outcome.result.evaluators
    assert (failed.error, failed.score, failed.passed) == ("internal", 0.0, False)
    assert "ZeroDivisionError: boom" in (failed.reason or "")
    assert exact.passed and outcome.result.score == 0.75 and outcome.result.passed


async def test_missing_expected_is_an_error_result() -> None:
    outcome = await pipeline({"evaluator": "exact_match"}).process(raw())
    assert outcome.result is not None
    assert outcome.result.evaluators[0].error == "missing_field"
    assert not outcome.result.passed


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
async def test_out_of_range_scores_are_rejected(bad: float) -> None:
    outcome = await pipeline({"evaluator": "test_out_of_range"}).process(raw(metadata={"score": str(bad)}))
    assert outcome.result is not None
    assert outcome.result.evaluators[0].error == "bad_score"
    assert outcome.result.score == 0.0


async def test_async_evaluators_run_and_report_counters() -> None:
    p = pipeline({"evaluator": "test_async"}, {"evaluator": "exact_match"})
    await p.start()
    outcome = await p.process(raw(expected="Paris"))
    await p.close()
    assert _Slow.started >= 1
    assert outcome.result is not None
    assert [e.name for e in outcome.result.evaluators] == ["test_async", "exact_match"]
    assert outcome.result.score == 0.75
    assert outcome.counters == {"test_async": {"calls": 1}}


async def test_an_evaluator_bug_dead_letters_as_internal_without_raising() -> None:
    outcome = await pipeline({"evaluator": "test_returns_none"}).process(raw())
    assert outcome.dead_letter is not None and outcome.dead_letter.kind == "internal"
    assert "AttributeError" in outcome.dead_letter.reason


async def test_result_fields() -> None:
    clock = iter([100.0, 100.25]).__next__
    p = pipeline({"evaluator": "exact_match"}, clock=clock)
    outcome = await p.process(
        raw(expected="Paris", category="qa_simple", timestamp="2026-11-21T10:00:00+08:00")
    )
    result = outcome.result
    assert result is not None
    assert (result.id, result.model, result.suite, result.category) == ("e1", "m", "s", "qa_simple")
    assert (result.score, result.passed, result.grade, result.threshold) == (1.0, True, "excellent", 0.5)
    assert result.event_time == "2026-11-21T02:00:00.000Z"
    assert result.latency_ms == 250.0


async def test_the_synchronous_path_gives_the_awaited_result_and_refuses_async_suites() -> None:
    rules = pipeline(
        {"evaluator": "exact_match"},
        {"evaluator": "test_raises"},
        {"evaluator": "contains", "params": {"value": "Par"}},
        clock=lambda: 100.0,
    )
    event = raw(expected="Paris")
    awaited = await rules.process(event, Source("t", 0, 1), received_at=99.0)
    sync = rules.process_sync(event, Source("t", 0, 1), 99.0)
    assert sync is not None and sync.result is not None
    assert sync.result == awaited.result and sync.counters == awaited.counters
    assert [e.error for e in sync.result.evaluators] == [None, "internal", None]
    # a suite that needs the event loop: process_sync declines, evaluate_sync refuses
    mixed = pipeline({"evaluator": "test_async"}, {"evaluator": "exact_match"})
    assert mixed.process_sync(event, Source(), 99.0) is None
    suite = mixed.suites.route(mixed.decode(event))
    with pytest.raises(RuntimeError, match="await evaluate"):
        mixed.evaluate_sync(mixed.decode(event), suite, received_at=99.0)
